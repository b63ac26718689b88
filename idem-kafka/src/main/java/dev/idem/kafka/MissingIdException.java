package dev.idem.kafka;

/**
 * The reason {@link KafkaInbox} gives its {@link DeadLetters} for a record that carries no usable
 * message id: no id header, or one that is not a valid id (empty, too long, control characters).
 */
public final class MissingIdException extends Exception {
  public MissingIdException(String message) {
    super(message);
  }
}
