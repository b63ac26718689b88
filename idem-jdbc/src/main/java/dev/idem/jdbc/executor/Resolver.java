package dev.idem.jdbc.executor;

import java.util.Optional;

/**
 * Looks up, at the provider, whether an earlier attempt of an external effect already happened,
 * by reference ({@link ExternalAttempt#callKey()}). Asked before a takeover calls out again, so a
 * charge the crashed holder made is recorded instead of retried blind.
 *
 * @param <T> the result type of the external call
 * @param <X> the exception the look-up may throw
 */
@FunctionalInterface
public interface Resolver<T, X extends Exception> {

  /**
   * @return the result of the earlier attempt if the provider knows it; empty if the provider has
   *     no record of it, and the call is made again
   */
  Optional<T> lookUp(ExternalAttempt attempt) throws X;
}
