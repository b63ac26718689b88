package dev.idem.jdbc.executor;

/**
 * The call to the outside world of an external effect (a card charge, an email). It runs outside
 * any database transaction and may run more than once for one intent (after a crash or a lease that
 * ran out), always with the same {@link ExternalAttempt#callKey()}: send that key to the provider so
 * the provider performs the effect once.
 *
 * @param <T> the result, stored with the key and replayed to every repeat
 * @param <X> the exception the call may throw
 */
@FunctionalInterface
public interface ExternalCall<T, X extends Exception> {
  /**
   * Makes the call. Runs outside any transaction; may run again for the same intent.
   *
   * @return the result, stored with the key and replayed (a decline is a result too)
   * @throws X a failure: the attempt's lease is ended and the next repeat takes over
   */
  T call(ExternalAttempt attempt) throws X;
}
