package dev.idem.key;

import dev.idem.IdemException;
import dev.idem.internal.Require;

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
  private final transient Fingerprint stored;
  private final transient Fingerprint given;

  /**
   * @throws IllegalArgumentException if an argument is null
   */
  public KeyReuseException(IdempotencyKey key, Fingerprint stored, Fingerprint given) {
    super("key " + Require.notNull(key, "key") + " was first used with request fingerprint "
        + Require.notNull(stored, "stored").hex() + " and is now reused with a different request (fingerprint "
        + Require.notNull(given, "given").hex() + "); a key names one intent: send a new key for a new request");
    this.key = key;
    this.stored = stored;
    this.given = given;
  }

  /** The reused key; null after deserialization (the fields are transient). */
  public IdempotencyKey key() {
    return key;
  }

  /** The fingerprint recorded with the first use. */
  public Fingerprint stored() {
    return stored;
  }

  /** The fingerprint of the refused request. */
  public Fingerprint given() {
    return given;
  }
}
