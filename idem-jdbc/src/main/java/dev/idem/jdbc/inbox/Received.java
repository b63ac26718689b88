package dev.idem.jdbc.inbox;

import java.util.List;

/**
 * What {@link Inbox#receiveAll} did with each message of a batch, every list in the order of the
 * batch; each message is in exactly one list.
 *
 * @param applied messages whose effect ran and committed (or, inside your transaction, is recorded
 *     in it): acknowledge them
 * @param duplicates messages received before, within the window, or repeating an earlier message
 *     of the same batch: their effect did not run; acknowledge them
 * @param failed messages whose effect threw: their part was rolled back and their id is free, so a
 *     redelivery runs them again; each with what its effect threw
 * @param inFlight messages another copy of which was still uncommitted when the inbox's wait ran
 *     out: nothing was written for them; do not acknowledge them, the broker redelivers them
 * @param <M> the message type
 */
public record Received<M>(List<M> applied, List<M> duplicates, List<Failure<M>> failed, List<M> inFlight) {

  /** Unmodifiable copies of the lists. */
  public Received {
    applied = List.copyOf(applied);
    duplicates = List.copyOf(duplicates);
    failed = List.copyOf(failed);
    inFlight = List.copyOf(inFlight);
  }

  /**
   * A message whose effect threw.
   *
   * @param error what the effect threw (or, if the effect caught an SQL error of its own and
   *     returned, the error saying its part could only be rolled back)
   */
  public record Failure<M>(M message, Exception error) {}

  /** True if every message is settled: applied or a duplicate, none failed or in flight. */
  public boolean allSettled() {
    return failed.isEmpty() && inFlight.isEmpty();
  }
}
