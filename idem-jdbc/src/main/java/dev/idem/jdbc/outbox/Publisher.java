package dev.idem.jdbc.outbox;

import dev.idem.internal.Failures;
import java.util.ArrayList;
import java.util.List;

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
 *
 * <p>The relay hands over each claimed batch through {@link #publishAll(List)}, which by default
 * publishes one message after the other. A publisher to a broker that acknowledges asynchronously
 * (Kafka) overrides it to send the whole batch and wait once, which is what makes a relay fast.
 */
@FunctionalInterface
public interface Publisher {

  /** Sends {@code message}; throws if it could not be sent. */
  void publish(OutboxMessage message) throws Exception;

  /**
   * Sends a batch and says, per message, whether the receiver has it.
   *
   * <p>Returns one entry per message of {@code batch}, in its order: {@code null} for a message the
   * receiver acknowledged (the relay marks it sent), else the reason it was not (the relay retries
   * it after its back-off, or parks it, exactly as for a throwing {@link #publish}). Report a
   * message as acknowledged only once the receiver has confirmed it: the relay marks nothing else.
   * If this method throws, or returns a list of another size, every message of the batch counts as
   * not sent.
   *
   * <p>The default calls {@link #publish} for each message in order, a failure of one not stopping
   * the others.
   *
   * @return a modifiable or unmodifiable list of {@code batch.size()} entries, {@code null} meaning
   *     "acknowledged"
   */
  default List<Throwable> publishAll(List<OutboxMessage> batch) throws Exception {
    List<Throwable> outcomes = new ArrayList<>(batch.size());
    for (OutboxMessage m : batch) {
      try {
        publish(m);
        outcomes.add(null);
      } catch (Throwable e) {
        // An Error from a publisher (an AssertionError, a serializer's StackOverflowError) is a
        // failed publish like any other: escaping here would fail the whole batch, republish the
        // messages before it on every poll, and never park the poison message.
        Failures.rethrowIfFatal(e);
        outcomes.add(e);
      }
    }
    return outcomes;
  }
}
