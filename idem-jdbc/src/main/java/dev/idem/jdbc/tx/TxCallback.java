package dev.idem.jdbc.tx;

/**
 * Work done in a transaction that returns a value. It may throw the caller's own checked exception
 * type {@code X}, which idem passes through unchanged after rolling back.
 *
 * @param <T> the result
 * @param <X> the exception the work may throw
 */
@FunctionalInterface
public interface TxCallback<T, X extends Exception> {
  /**
   * The work. {@code tx} is valid only until this returns: do not keep it or its connection.
   *
   * @return the result, returned by the call that ran the work
   * @throws X the caller's own failure, rethrown after the transaction (or savepoint) is rolled back
   */
  T apply(Tx tx) throws X;
}
