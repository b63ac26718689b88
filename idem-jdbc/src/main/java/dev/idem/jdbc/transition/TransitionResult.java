package dev.idem.jdbc.transition;

import dev.idem.transition.Outcome;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What a conditional write did, and where the row is now: the {@link Outcome} plus the row's state
 * and version as the write left them ({@link Outcome#APPLIED}) or as the follow-up read found them
 * (otherwise). A caller that gets {@link Outcome#CONFLICT} learns from it what it conflicted with,
 * without a read of its own.
 *
 * <p>Does not guarantee that the row is still there: another transaction may move it right after
 * the statement or the read that produced this result.
 *
 * @param outcome what the write did
 * @param rowFound whether a row with the id exists (false only for a {@link Outcome#CONFLICT})
 * @param state the row's status, empty if there is no row or its status is SQL NULL
 * @param version the row's version, empty if there is no row or the table has no version column
 */
public record TransitionResult(Outcome outcome, boolean rowFound, Optional<String> state, OptionalLong version) {

  public TransitionResult {
    if (outcome == null || state == null || version == null) {
      throw new IllegalArgumentException("outcome, state and version must not be null (use Optional.empty())");
    }
    if (!rowFound && (outcome != Outcome.CONFLICT || state.isPresent() || version.isPresent())) {
      throw new IllegalArgumentException("without a row the outcome is CONFLICT with no state or version");
    }
  }

  /** Shorthand for {@code outcome().isSuccess()}: APPLIED or ALREADY_DONE. */
  public boolean isSuccess() {
    return outcome.isSuccess();
  }
}
