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
 */
public sealed interface TransitionResult permits TransitionResultValue {
  /** What the write did. */
  Outcome outcome();

  /** Whether a row with the id exists (false only for a {@link Outcome#CONFLICT}). */
  boolean rowFound();

  /** The row's status, empty if there is no row or its status is SQL NULL. */
  Optional<String> state();

  /** The row's version, empty if there is no row or the table has no version column. */
  OptionalLong version();
}
