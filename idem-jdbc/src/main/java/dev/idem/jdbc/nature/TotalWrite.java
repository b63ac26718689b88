package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/**
 * What {@link Totals#record} did, and the total the row holds after it.
 */
public sealed interface TotalWrite permits TotalWriteValue {
  /**
   * {@link Outcome#APPLIED} if this call wrote its total (the row was missing or held less);
   * {@link Outcome#ALREADY_DONE} if the row already held this total or a larger one (a repeat, or
   * an older total that arrived late) and was left as it was. Never CONFLICT.
   */
  Outcome outcome();

  /** The row's total after the call: this call's when APPLIED, the larger one found otherwise. */
  long stored();
}
