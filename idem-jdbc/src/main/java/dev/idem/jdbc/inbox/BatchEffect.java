package dev.idem.jdbc.inbox;

import dev.idem.jdbc.tx.Tx;

/**
 * The effect of one message of a batch ({@link Inbox#receiveAll}), run in the batch's transaction
 * under a savepoint of its own: what it writes through {@code tx} commits with the message's
 * claim, or, if it throws, is rolled back with it while the rest of the batch goes on.
 *
 * @param <M> the message type
 */
@FunctionalInterface
public interface BatchEffect<M> {
  void apply(Tx tx, M message) throws Exception;
}
