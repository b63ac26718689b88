package dev.idem.jdbc.ops;

import java.time.Duration;

/** The one implementation of {@link OutboxStats}: a value, built by idem only. */
record OutboxStatsValue(long pending, long parked, long parkedEffectCommitted, Duration oldestPending) implements OutboxStats {}
