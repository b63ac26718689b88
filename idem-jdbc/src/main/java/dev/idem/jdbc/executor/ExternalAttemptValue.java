package dev.idem.jdbc.executor;

import dev.idem.fence.FencingToken;
import dev.idem.internal.base.Require;
import dev.idem.key.IdempotencyKey;

/** The one implementation of {@link ExternalAttempt}: a value, built by idem only. */
record ExternalAttemptValue(IdempotencyKey key, IdempotencyKey callKey, FencingToken token, boolean takeover) implements ExternalAttempt {
  ExternalAttemptValue {
    Require.notNull(key, "key");
    Require.notNull(callKey, "callKey");
    Require.notNull(token, "token");
  }
}
