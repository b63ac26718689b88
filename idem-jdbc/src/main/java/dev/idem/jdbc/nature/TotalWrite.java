package dev.idem.jdbc.nature;

import dev.idem.transition.Outcome;

/**
 * What {@link Totals#record} did, and the total the row holds after it.
 *
 * @param outcome {@link Outcome#APPLIED} if this call wrote its total (the row was missing or held
 *     less); {@link Outcome#ALREADY_DONE} if the row already held this total or a larger one (a
 *     repeat, or an older total that arrived late) and was left as it was. Never CONFLICT.
 * @param stored the row's total after the call: this call's when APPLIED, the larger one found
 *     otherwise
 */
public record TotalWrite(Outcome outcome, long stored) {
  public TotalWrite {
    if (outcome == null || outcome == Outcome.CONFLICT) {
      throw new IllegalArgumentException("a total's write is APPLIED or ALREADY_DONE, was " + outcome);
    }
  }
}
