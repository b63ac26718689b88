package dev.idem.jdbc;

/**
 * Work done in a transaction that returns a value. It may throw the caller's own checked exception
 * type {@code X}, which idem passes through unchanged after rolling back.
 *
 * @param <T> the result
 * @param <X> the exception the work may throw
 */
@FunctionalInterface
public interface TxCallback<T, X extends Exception> {
  T apply(Tx tx) throws X;
}
