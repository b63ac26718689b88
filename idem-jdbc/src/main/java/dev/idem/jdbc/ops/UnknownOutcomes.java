package dev.idem.jdbc.ops;

import java.time.Duration;

/**
 * The external effects whose outcome is unknown ({@link StuckKey}s), as a gauge reads them: how
 * many, and how long ago the oldest one's lease ran out ({@link Duration#ZERO} when there are none).
 * Counted by the database in one statement, by its clock.
 */
public sealed interface UnknownOutcomes permits UnknownOutcomesValue {
  long count();

  Duration oldest();
}
