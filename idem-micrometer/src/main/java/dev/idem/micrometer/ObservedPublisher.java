package dev.idem.micrometer;

import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;

/**
 * A {@link Publisher} that runs each publish inside a Micrometer {@link Observation} named {@value
 * #NAME}, so traces show every message the relay sends (and, with a metrics handler, a timer of the
 * same name). Wrap the publisher before giving it to the relay: {@code
 * idem.relay(ObservedPublisher.wrap(publisher, observationRegistry))}.
 *
 * <p>Key values: low cardinality {@code topic} (the message's topic; it becomes a tag of the
 * handler's timer, so keep topics few); high cardinality {@code message.id} and {@code attempt}
 * (spans only, never tags). Contextual name (the span's name): {@code "publish <topic>"}.
 *
 * <p>Guarantees: the delegate is called exactly once per publish, with the same message, on the
 * calling thread, inside the observation (so a tracing handler's span is current while it runs and
 * can carry the trace to the broker); its exception is recorded on the observation and rethrown
 * unchanged, so the relay's retry and parking are untouched.
 *
 * <p>Does not guarantee: anything about the mark that follows a publish (the relay's own {@link
 * IdemMetrics#OUTBOX_PUBLISHED} counts those). The observation is named {@value #NAME}, not {@code
 * idem.outbox.publish}, because that name is {@link IdemMetrics}'s timer, with other tags: two
 * meters of one name with different tag keys are refused by Prometheus.
 */
public final class ObservedPublisher implements Publisher {

  /** The observation's name. */
  public static final String NAME = "idem.relay.publish";

  private final Publisher delegate;
  private final ObservationRegistry registry;

  private ObservedPublisher(Publisher delegate, ObservationRegistry registry) {
    this.delegate = delegate;
    this.registry = registry;
  }

  /**
   * {@code publisher}, observed on {@code registry}.
   *
   * @throws IllegalArgumentException if an argument is null
   */
  public static Publisher wrap(Publisher publisher, ObservationRegistry registry) {
    if (publisher == null || registry == null) {
      throw new IllegalArgumentException("publisher and registry must not be null");
    }
    return new ObservedPublisher(publisher, registry);
  }

  @Override
  public void publish(OutboxMessage message) throws Exception {
    String topic = message.topic() == null ? "unknown" : message.topic();
    Observation.createNotStarted(NAME, registry)
        .contextualName("publish " + topic)
        .lowCardinalityKeyValue("topic", topic)
        .highCardinalityKeyValue("message.id", String.valueOf(message.id()))
        .highCardinalityKeyValue("attempt", Integer.toString(message.attempt()))
        .observeChecked(() -> delegate.publish(message));
  }
}
