package dev.idem.jdbc.executor;

import dev.idem.fence.FencingToken;
import dev.idem.internal.base.Require;
import dev.idem.key.IdempotencyKey;

/**
 * One attempt at an external effect (phase 2 of {@link IdempotentExecutor#executeExternal}): what
 * the call to the outside world is given.
 *
 * @param key the intent key the caller passed
 * @param callKey the key to send to the provider (e.g. as its {@code Idempotency-Key} header):
 *     derived from {@code key} with {@link dev.idem.key.Keys#child}, so it is the same for the first
 *     attempt and for every takeover after a crash, and a provider that dedupes by it performs the
 *     effect once
 * @param token the fencing token of this attempt's claim; a takeover holds a higher one, and the
 *     result of an attempt whose token is no longer the highest is refused
 * @param takeover whether this attempt took the claim over from an earlier holder whose lease ran
 *     out (the earlier call may or may not have reached the provider)
 */
public record ExternalAttempt(IdempotencyKey key, IdempotencyKey callKey, FencingToken token, boolean takeover) {
  public ExternalAttempt {
    Require.notNull(key, "key");
    Require.notNull(callKey, "callKey");
    Require.notNull(token, "token");
  }
}
