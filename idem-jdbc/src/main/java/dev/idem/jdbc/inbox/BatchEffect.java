package dev.idem.jdbc.inbox;

import dev.idem.jdbc.tx.Tx;

/**
 * The effect of one message of a batch ({@link Inbox#receiveAll}), run in the batch's transaction:
 * what it writes through {@code tx} commits with the message's claim, or, if it throws, is rolled
 * back with it while the rest of the batch goes on (the batch runs again without that message,
 * each effect then under a savepoint of its own; so an effect before a failed one may run twice,
 * its first run's writes rolled back).
 *
 * @param <M> the message type
 */
@FunctionalInterface
public interface BatchEffect<M> {
  void apply(Tx tx, M message) throws Exception;
}
