package dev.idem.jdbc.outbox;

/**
 * Sends one outbox message to a broker, a webhook or any other receiver. Supplied by the user and
 * called by a {@link Relay}.
 *
 * <p>Returning normally means "the receiver has it"; the relay then marks the message sent. Throwing
 * means "not sent": the relay tries again later, with back-off, and parks the message after too
 * many attempts.
 *
 * <p>The relay delivers <b>at least once</b>: a crash (or a lost connection) between a successful
 * publish and the mark sends the same message again, with the same {@link OutboxMessage#id()}. Pass
 * that id to the receiver as its message id (a header, a broker message id) so its inbox can
 * absorb the copy.
 */
@FunctionalInterface
public interface Publisher {

  /** Sends {@code message}; throws if it could not be sent. */
  void publish(OutboxMessage message) throws Exception;
}
