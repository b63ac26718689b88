package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/** The one implementation of {@link TotalWrite}: a value, built by idem only. */
record TotalWriteValue(Outcome outcome, long stored) implements TotalWrite {
  TotalWriteValue {
    if (outcome == null || outcome == Outcome.CONFLICT) {
      throw new IllegalArgumentException("a total's write is APPLIED or ALREADY_DONE, was " + outcome);
    }
  }
}
