package dev.idem.jdbc.inbox;

import java.util.List;

/** The one implementation of {@link Received}: a value, built by idem only. */
record ReceivedValue<M>(List<M> applied, List<M> duplicates, List<Received.Failure<M>> failed, List<M> inFlight)
    implements Received<M> {

  /** Unmodifiable copies of the lists. */
  ReceivedValue {
    applied = List.copyOf(applied);
    duplicates = List.copyOf(duplicates);
    failed = List.copyOf(failed);
    inFlight = List.copyOf(inFlight);
  }

  @Override
  public boolean allSettled() {
    return failed.isEmpty() && inFlight.isEmpty();
  }

  /** The one implementation of {@link Received.Failure}. */
  record FailureValue<M>(M message, Exception error) implements Received.Failure<M> {}
}
