package dev.idem.jdbc.ops;

import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.time.OffsetDateTime;

/** The one implementation of {@link StuckKey}: a value, built by idem only. */
record StuckKeyValue(IdempotencyKey key, long fence, String callKey, Duration leaseEndedAgo, OffsetDateTime createdAt) implements StuckKey {}
