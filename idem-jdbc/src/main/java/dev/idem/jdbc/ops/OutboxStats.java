package dev.idem.jdbc.ops;

import java.time.Duration;

/**
 * The outbox at one moment, counted in one statement: pending (not yet sent, parked excluded),
 * parked, and the age of the oldest pending message by the database clock ({@link Duration#ZERO}
 * when none is pending). Messages of transactions not yet committed are not seen.
 */
public sealed interface OutboxStats permits OutboxStatsValue {
  long pending();

  long parked();

  Duration oldestPending();
}
