package dev.idem.http;

import java.util.concurrent.Callable;

/**
 * The transaction a guarded request runs in, for a framework that wants the whole guarded call
 * (the claim of the key, the handler, the stored response) inside a transaction of its own. The
 * Spring starter runs it in Spring's {@code TransactionTemplate}; idem's executor then joins that
 * transaction through the {@code TransactionBinding} of the {@code Idem} the filter was built
 * from, so the key and the handler's writes commit together when the framework commits.
 *
 * <p>{@link #DIRECT}, the default, calls the work as it is: idem's executor then owns the
 * transaction, commits it before the filter sends anything, and runs the work again (handler
 * included) on a serialization failure or deadlock, within idem's {@code RetryBudget}.
 *
 * <p>What an implementation must do: run {@code work} once, inside the transaction; commit it
 * when {@code work} returns and roll it back when it throws, whatever it throws (checked
 * exceptions too); and then return what {@code work} returned or throw what it threw,
 * <b>unchanged</b> (unwrap it if the framework wraps it). The filter relies on that: it rolls a
 * response back on purpose (a status its {@link StorePolicy} does not store) by throwing, and
 * finds the response in what comes back. A framework's transaction is not run again by idem; a
 * serialization failure then reaches the container, and the key stays free.
 */
@FunctionalInterface
public interface RequestTransaction {

  /** No transaction of the filter's own: idem's executor owns one. */
  RequestTransaction DIRECT = Callable::call;

  /**
   * Runs {@code work} in a transaction, commits it and returns what it returned; rolls it back
   * and throws what it threw, unchanged.
   */
  <T> T run(Callable<T> work) throws Exception;
}
