package dev.idem.key;

/**
 * The name of one user intent: a scope (the caller, tenant or endpoint that owns the key) plus a
 * value. Two keys are equal only when both scope and value are equal, so the same value sent by
 * two callers is two intents, never a collision.
 *
 * <p>Guarantees: a constructed key is valid. Scope and value are each 1 to {@value #MAX_LENGTH}
 * visible ASCII characters ({@code '!'} to {@code '~'}); anything else is refused with an
 * {@link IllegalArgumentException} that says which part is wrong and why, before any storage sees
 * it.
 *
 * <p>Does not guarantee: that the key identifies an intent. A key made per HTTP attempt, or lost on
 * an app restart, lets a retry through as a new operation; make it once, where the intent starts,
 * and persist it until the intent finishes. Derive the keys of later hops with {@link Keys}.
 *
 * @param scope who owns the key, e.g. {@code "merchant-42/payments"}
 * @param value the key itself, e.g. a client-made UUID
 */
public record IdempotencyKey(String scope, String value) {

  /** The longest scope or value accepted, in characters. */
  public static final int MAX_LENGTH = 255;

  public IdempotencyKey {
    check("scope", scope);
    check("value", value);
  }

  /** Same as the constructor; reads better at call sites. */
  public static IdempotencyKey of(String scope, String value) {
    return new IdempotencyKey(scope, value);
  }

  /**
   * Checks one part of a key (or a message id, consumer name, resource name: anything stored under
   * the same rules) and throws an {@link IllegalArgumentException} naming {@code what} and the
   * problem.
   *
   * @return {@code text}, when valid
   */
  public static String check(String what, String text) {
    if (text == null) {
      throw new IllegalArgumentException(what + " must not be null");
    }
    if (text.isEmpty()) {
      throw new IllegalArgumentException(what + " must not be empty");
    }
    if (text.isBlank()) {
      throw new IllegalArgumentException(what + " must not be blank (it is only whitespace)");
    }
    if (text.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(
          what + " is " + text.length() + " characters long; at most " + MAX_LENGTH + " are allowed");
    }
    for (int i = 0; i < text.length(); ) {
      int c = text.codePointAt(i);
      if (c < 0x20 || c == 0x7f) {
        throw new IllegalArgumentException(
            what + " contains a control character (" + codePoint(c) + ") at index " + i
                + "; only visible ASCII ('!' to '~') is allowed");
      }
      if (c > 0x7e) {
        // Non-ASCII is refused rather than normalised: two spellings of one text (composed and
        // decomposed accents) would be two keys for one intent.
        throw new IllegalArgumentException(
            what + " contains a non-ASCII character (" + codePoint(c) + ") at index " + i
                + "; only visible ASCII ('!' to '~') is allowed");
      }
      if (c == ' ') {
        throw new IllegalArgumentException(
            what + " contains a space at index " + i + "; only visible ASCII ('!' to '~') is allowed");
      }
      i += Character.charCount(c);
    }
    return text;
  }

  private static String codePoint(int c) {
    return String.format("U+%04X", c);
  }

  @Override
  public String toString() {
    return scope + ":" + value;
  }
}
