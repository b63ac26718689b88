package dev.idem.jdbc;

/**
 * Work done in a transaction that returns nothing. See {@link TxCallback}.
 *
 * @param <X> the exception the work may throw
 */
@FunctionalInterface
public interface TxConsumer<X extends Exception> {
  void accept(Tx tx) throws X;
}
