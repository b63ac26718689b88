package dev.idem.jdbc.executor;

import dev.idem.fence.FencingToken;
import dev.idem.internal.base.Require;
import dev.idem.key.IdempotencyKey;

/**
 * One attempt at an external effect (phase 2 of {@link IdempotentExecutor#executeExternal}): what
 * the call to the outside world is given.
 *
 * <p>Built by idem; implement it only to hand a fake to your own code in a test.
 */
public interface ExternalAttempt {
  /** The intent key the caller passed. */
  IdempotencyKey key();

  /**
   * The key to send to the provider (e.g. as its {@code Idempotency-Key} header): derived from
   * {@code key} with {@link dev.idem.key.Keys#child}, so it is the same for the first attempt and
   * for every takeover after a crash, and a provider that dedupes by it performs the effect once.
   */
  IdempotencyKey callKey();

  /**
   * The fencing token of this attempt's claim; a takeover holds a higher one, and the result of
   * an attempt whose token is no longer the highest is refused.
   */
  FencingToken token();

  /**
   * Whether this attempt took the claim over from an earlier holder whose lease ran out (the
   * earlier call may or may not have reached the provider).
   */
  boolean takeover();
}
