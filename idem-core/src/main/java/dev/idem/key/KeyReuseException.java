package dev.idem.key;

import dev.idem.IdemException;
import dev.idem.internal.base.Require;

/**
 * A key came back with a request that differs from the one it was first used with. The stored
 * record is unchanged and no effect of this request was committed (a store that claims at commit
 * may have run the effect first, and rolled it back). This is not a repeat: it is a client bug (a
 * key reused for a new intent, a derivation that drops a field), made visible instead of silently
 * answered with the first request's result. Over HTTP, answer 422.
 */
public class KeyReuseException extends IdemException {
  private static final long serialVersionUID = 1L;

  private final transient IdempotencyKey key;
  private final String storedHex;
  private final transient Fingerprint given;

  /**
   * @throws IllegalArgumentException if an argument is null
   */
  public KeyReuseException(IdempotencyKey key, Fingerprint stored, Fingerprint given) {
    this(key, Require.notNull(stored, "stored").hex(), given);
  }

  /**
   * For a store that keeps only the first digits of a fingerprint (idem's key table keeps 16 bytes,
   * 32 hex digits, of the SHA-256).
   *
   * @param storedHex the recorded fingerprint's hex digits as stored: all 64, or the first ones
   * @throws IllegalArgumentException if an argument is null or {@code storedHex} is not 1 to 64
   *     lower-case hex digits
   */
  public KeyReuseException(IdempotencyKey key, String storedHex, Fingerprint given) {
    super("key " + Require.notNull(key, "key") + " was first used with request fingerprint "
        + checkedHex(storedHex) + (storedHex.length() < 64 ? "…" : "") + " and is now reused with a different request"
        + " (fingerprint " + Require.notNull(given, "given").hex() + "); a key names one intent: send a new key for a"
        + " new request");
    this.key = key;
    this.storedHex = storedHex;
    this.given = given;
  }

  private static String checkedHex(String hex) {
    if (hex == null || hex.isEmpty() || hex.length() > 64
        || !Fingerprint.isLowerHex(hex)) {
      throw new IllegalArgumentException("storedHex must be 1 to 64 lower-case hex digits, was " + hex);
    }
    return hex;
  }

  /** The reused key; null after deserialization (the fields are transient). */
  public IdempotencyKey key() {
    return key;
  }

  /**
   * The hex of the fingerprint recorded with the first use, as far as the store keeps it: idem's
   * key table keeps the first 32 of its 64 digits, which a {@link #given()} fingerprint starting
   * with them matches.
   */
  public String storedHex() {
    return storedHex;
  }

  /** The fingerprint of the refused request. */
  public Fingerprint given() {
    return given;
  }
}
