package dev.idem.jdbc.tx;

/**
 * Work done in a transaction that returns nothing. See {@link TxCallback}.
 *
 * @param <X> the exception the work may throw
 */
@FunctionalInterface
public interface TxConsumer<X extends Exception> {
  /**
   * The work. {@code tx} is valid only until this returns: do not keep it or its connection.
   *
   * @throws X the caller's own failure, rethrown after the transaction (or savepoint) is rolled back
   */
  void accept(Tx tx) throws X;
}
