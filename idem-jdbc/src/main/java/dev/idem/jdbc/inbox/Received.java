package dev.idem.jdbc.inbox;

import java.util.List;

/**
 * What {@link Inbox#receiveAll} did with each message of a batch, every list in the order of the
 * batch; each message is in exactly one list.
 *
 * @param <M> the message type
 */
public sealed interface Received<M> permits ReceivedValue {
  /** Messages whose effect ran and committed (or, inside your transaction, is recorded in it): acknowledge them. */
  List<M> applied();

  /**
   * Messages received before, within the window, or repeating an earlier message of the same
   * batch: their effect did not run; acknowledge them.
   */
  List<M> duplicates();

  /**
   * Messages whose effect threw: their part was rolled back and their id is free, so a redelivery
   * runs them again; each with what its effect threw.
   */
  List<Failure<M>> failed();

  /**
   * Messages another copy of which was still uncommitted when the inbox's wait ran out: nothing was
   * written for them; do not acknowledge them, the broker redelivers them.
   */
  List<M> inFlight();

  /** True if every message is settled: applied or a duplicate, none failed or in flight. */
  boolean allSettled();

  /** A message whose effect threw. */
  sealed interface Failure<M> permits ReceivedValue.FailureValue {
    /** The message. */
    M message();

    /**
     * What the effect threw (or, if the effect caught an SQL error of its own and returned, the
     * error saying its part could only be rolled back).
     */
    Exception error();
  }
}
