package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/**
 * What {@link UniqueRows#insert(java.util.Map, dev.idem.jdbc.tx.TxCallback)} did.
 *
 * @param outcome {@link Outcome#APPLIED} if this call inserted the row (and ran the rest of the
 *     effect); {@link Outcome#ALREADY_DONE} if a row with the same key was there (a repeat, or a twin
 *     that won): nothing was written and the rest of the effect did not run. Never CONFLICT.
 * @param value what the rest of the effect returned when APPLIED; null when ALREADY_DONE
 * @param <T> the effect's result
 */
public record UniqueWrite<T>(Outcome outcome, T value) {
  public UniqueWrite {
    if (outcome == null || outcome == Outcome.CONFLICT) {
      throw new IllegalArgumentException("an insert under a unique key is APPLIED or ALREADY_DONE, was " + outcome);
    }
  }

  /** Whether this call inserted the row. */
  public boolean applied() {
    return outcome == Outcome.APPLIED;
  }
}
