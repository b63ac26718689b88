package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/** The one implementation of {@link UniqueWrite}: a value, built by idem only. */
record UniqueWriteValue<T>(Outcome outcome, T value) implements UniqueWrite<T> {
  UniqueWriteValue {
    if (outcome == null || outcome == Outcome.CONFLICT) {
      throw new IllegalArgumentException("an insert under a unique key is APPLIED or ALREADY_DONE, was " + outcome);
    }
  }

  /** Whether this call inserted the row. */
  public boolean applied() {
    return outcome == Outcome.APPLIED;
  }
}
