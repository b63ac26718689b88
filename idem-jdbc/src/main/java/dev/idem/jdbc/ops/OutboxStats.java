package dev.idem.jdbc.ops;

import java.time.Duration;

/**
 * The outbox at one moment, counted in one statement: pending (not yet sent, parked excluded),
 * parked, of those the parked messages whose effect already committed ({@link
 * ParkedMessage#effectCommitted}), and the age of the oldest pending message by the database clock
 * ({@link Duration#ZERO} when none is pending). Messages of transactions not yet committed are not
 * seen.
 */
public sealed interface OutboxStats permits OutboxStatsValue {
  long pending();

  long parked();

  /**
   * Of {@link #parked()}, those an inbox of this database already received: dead letters whose
   * effect committed, apart from the ones that need a decision (redrive or drop).
   */
  long parkedEffectCommitted();

  Duration oldestPending();
}
