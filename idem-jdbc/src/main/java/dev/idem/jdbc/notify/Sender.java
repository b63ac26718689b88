package dev.idem.jdbc.notify;

/**
 * Sends one notification to the outside world (an email provider, an SMS gateway, APNs, FCM). Runs
 * outside any database transaction.
 *
 * @param <X> what the send may throw
 */
@FunctionalInterface
public interface Sender<X extends Exception> {
  /**
   * Sends the message. Throwing means "maybe not sent": under {@link
   * Delivery#AT_LEAST_ONCE_MAY_REPEAT} the claim's lease is ended so that a redelivery sends at
   * once; under {@link Delivery#AT_MOST_ONCE_MAY_LOSE} the message stays claimed and is lost.
   */
  void send(Outgoing message) throws X;
}
