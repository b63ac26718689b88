package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/**
 * What {@link UniqueRows#insert(java.util.Map, dev.idem.jdbc.tx.TxCallback)} did.
 *
 * @param <T> the effect's result
 */
public sealed interface UniqueWrite<T> permits UniqueWriteValue {
  /**
   * {@link Outcome#APPLIED} if this call inserted the row (and ran the rest of the effect);
   * {@link Outcome#ALREADY_DONE} if a row with the same key was there (a repeat, or a twin that
   * won): nothing was written and the rest of the effect did not run. Never CONFLICT.
   */
  Outcome outcome();

  /** What the rest of the effect returned when APPLIED; null when ALREADY_DONE. */
  T value();

  /** Whether this call inserted the row. */
  boolean applied();
}
