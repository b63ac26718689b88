package dev.idem.jdbc.transition;

import dev.idem.transition.Outcome;
import java.util.Optional;
import java.util.OptionalLong;

/** The one implementation of {@link TransitionResult}: a value, built by idem only. */
record TransitionResultValue(Outcome outcome, boolean rowFound, Optional<String> state, OptionalLong version) implements TransitionResult {

  TransitionResultValue {
    if (outcome == null || state == null || version == null) {
      throw new IllegalArgumentException("outcome, state and version must not be null (use Optional.empty())");
    }
    if (!rowFound && (outcome != Outcome.CONFLICT || state.isPresent() || version.isPresent())) {
      throw new IllegalArgumentException("without a row the outcome is CONFLICT with no state or version");
    }
  }
}
