package dev.idem.key;

import dev.idem.internal.base.Sha256;
import java.time.Instant;
import java.time.temporal.ChronoUnit;

/**
 * Derives the key of every later hop from the key made where the intent started, so that any
 * retry, on any machine, after any crash, computes the same key without storing it first.
 *
 * <ul>
 *   <li>{@link #child}: one step of an intent ({@code order}, {@code payment}, {@code
 *       email/receipt}). Same parent and step give the same key; different steps never share one.
 *   <li>{@link #attempt}: a call to a third party. A retry of attempt 1 reuses attempt 1's key; a
 *       new attempt (the buyer picked another card after a decline) is a deliberate new operation
 *       and gets a new key, or the provider would replay the decline forever.
 *   <li>{@link #scheduledRun}: a periodic job. The key names the slot the run belongs to, never the
 *       clock when it started, so two replicas that both fire the 02:00 run produce one key.
 * </ul>
 *
 * <p>Guarantees: derivation is a pure function of its arguments (no clock, no randomness, no
 * machine identity), and distinct (parent, step) pairs in one scope give distinct keys, short of a
 * SHA-256 collision. A derived key keeps its parent's scope.
 *
 * <p>Does not guarantee: that the step names you choose tell real operations apart. A derivation
 * that leaves out what makes two operations differ (two receipts for one order, one step name)
 * gives them one key, and the second is swallowed. A {@link Fingerprint} stored with the key turns
 * that silent loss into a visible {@link KeyReuseException}.
 *
 * <h2>Why there is no helper that keys an action by its content</h2>
 *
 * A content hash ({@code sha256(user, amount, merchant)}) is right for content: two identical file
 * blocks really are one block. For an action it is a bug: a buyer who orders the same $4.50 coffee
 * twice in ten minutes made two purchases with identical content, and the second would be swallowed
 * as a "duplicate" &mdash; a silent lost sale. Content belongs in a {@link Fingerprint}, which
 * checks that a key is not reused for a different request; the key itself must name the intent.
 */
public final class Keys {
  private Keys() {}

  /**
   * The key of one step of the parent's intent: the same scope, and as value the SHA-256 (64
   * lower-case hex characters) of the parent's scope, value and the step: the seed's {@code parent +
   * "/" + step}, with lengths in front ({@code len(scope):scope/len(value):value/step}). The lengths
   * keep the split unambiguous: without them, parent {@code "a"} with step {@code "b/c"} and parent
   * {@code "a/b"} with step {@code "c"} would share a key. The scope is hashed because a child key
   * is often sent to another company, where two tenants' equal values must not name one operation.
   *
   * @throws IllegalArgumentException if {@code parent} is null or {@code step} is null, blank or
   *     not visible ASCII (the rules of {@link IdempotencyKey#check})
   */
  public static IdempotencyKey child(IdempotencyKey parent, String step) {
    if (parent == null) {
      throw new IllegalArgumentException("parent must not be null");
    }
    IdempotencyKey.check("step", step);
    // The scope is hashed too: a child key is often sent to another company (a provider's
    // Idempotency-Key), where two tenants' equal values must not name one operation.
    String scope = parent.scope();
    String value = parent.value();
    return new IdempotencyKey(scope,
        Sha256.hex(scope.length() + ":" + scope + "/" + value.length() + ":" + value + "/" + step));
  }

  /** A UUIDv7 in its 8-4-4-4-12 hex form: its first 48 bits are when it was minted. */
  private static final java.util.regex.Pattern UUID_V7 = java.util.regex.Pattern.compile(
      "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}");

  /**
   * {@link #child} for a parent that begins with a UUIDv7, keeping that time: the parent's UUIDv7,
   * a dot, then {@code child(parent, step)}'s 64 hex characters (101 characters). A key that carries
   * its root's time is what the partitioned layout of idem-jdbc files a key under (docs/scale.md);
   * derived again, it keeps the same prefix, so every key of one intent carries the time the intent
   * was made.
   *
   * @throws IllegalArgumentException as {@link #child}, or if {@code parent}'s value does not begin
   *     with a UUIDv7
   */
  public static IdempotencyKey timedChild(IdempotencyKey parent, String step) {
    IdempotencyKey child = child(parent, step);
    String value = parent.value();
    if (value.length() < 36 || !UUID_V7.matcher(value.substring(0, 36)).matches()) {
      throw new IllegalArgumentException("parent " + parent + " does not begin with a UUIDv7 (8-4-4-4-12 hex digits,"
          + " version 7), so it has no time for its children to keep: use Keys.child");
    }
    return new IdempotencyKey(parent.scope(), value.substring(0, 36) + "." + child.value());
  }

  /**
   * The key for attempt {@code n} (1, 2, ...) of a call to a third party: {@code child(parent,
   * "attempt/" + n)}. Send it to the provider as its idempotency key; reuse it for every retry of
   * the same attempt.
   *
   * @throws IllegalArgumentException if {@code parent} is null or {@code n < 1}
   */
  public static IdempotencyKey attempt(IdempotencyKey parent, int n) {
    if (n < 1) {
      throw new IllegalArgumentException("attempt must be 1 or more, was " + n);
    }
    return child(parent, "attempt/" + n);
  }

  /**
   * The key of the run of {@code job} due at {@code slot}: {@code job + "@" + slot} with the slot
   * in ISO-8601 UTC ({@code nightly-invoices@2026-10-28T02:00:00Z}). Pass the slot the scheduler
   * computed from the schedule (02:00:00), never {@code Instant.now()} at start: two replicas that
   * started at 02:00:00.4 and 02:00:03 must still produce one key. The slot text holds no {@code
   * '@'}, so the split between job and slot is unambiguous.
   *
   * @throws IllegalArgumentException if {@code scope} or {@code job} is invalid (the rules of
   *     {@link IdempotencyKey#check}), {@code slot} is null, or {@code slot} has a fraction of a
   *     second, which is the mark of a clock reading rather than a slot
   */
  public static IdempotencyKey scheduledRun(String scope, String job, Instant slot) {
    IdempotencyKey.check("scope", scope);
    IdempotencyKey.check("job", job);
    if (slot == null) {
      throw new IllegalArgumentException("slot must not be null");
    }
    if (!slot.truncatedTo(ChronoUnit.SECONDS).equals(slot)) {
      throw new IllegalArgumentException(
          "slot " + slot + " has a fraction of a second: pass the slot from the schedule, not the"
              + " clock when the run started");
    }
    String value = job + "@" + slot;
    if (value.length() > IdempotencyKey.MAX_LENGTH) {
      throw new IllegalArgumentException(
          "job is " + job.length() + " characters long; with the slot the key would be " + value.length()
              + ", and at most " + IdempotencyKey.MAX_LENGTH + " are allowed");
    }
    return new IdempotencyKey(scope, value);
  }
}
