package dev.idem.micrometer;

import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A {@link Publisher} that runs each publish inside a Micrometer {@link Observation} named {@value
 * #NAME}, so traces show every message the relay sends (and, with a metrics handler, a timer of the
 * same name). Wrap the publisher before giving it to the relay: {@code
 * idem.relay(ObservedPublisher.wrap(publisher, observationRegistry))}.
 *
 * <p>Key values: low cardinality {@code topic} (the message's topic; it becomes a tag of the
 * handler's timer, so keep topics few), {@code hop} ({@value #HOP}) and {@code outcome} ({@code
 * published} or {@code error}); high cardinality {@code message.id}, {@code attempt} and {@value
 * ObservedExecutor#INTENT} (the key of the intent that produced the message, its {@code
 * idem-intent} header; absent without one), on spans only, never tags. Contextual name (the span's
 * name): {@code "publish <topic>"}.
 *
 * <p>A relay hands each batch to {@link #publishAll}: the delegate's {@code publishAll} is called
 * once for it, so wrapping a batching publisher (Kafka's) keeps it batching.
 *
 * <p>Guarantees: the delegate is called exactly once per publish (or batch), with the same message, on the
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

  /** The observation's name, one per message. */
  public static final String NAME = "idem.relay.publish";
  /** The observations' {@code hop} key value: the relay handing a message on. */
  public static final String HOP = "publish";

  /** The name of the observation around a relay's batch ({@link #publishAll}), the messages' parent. */
  public static final String BATCH_NAME = "idem.relay.batch";

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
    Observation o = observation(message);
    o.observeChecked(() -> {
      try {
        delegate.publish(message);
      } catch (Exception | Error e) {
        o.lowCardinalityKeyValue("outcome", "error");
        throw e;
      }
      o.lowCardinalityKeyValue("outcome", "published");
    });
  }

  /**
   * Hands the whole batch to the delegate's {@code publishAll} once (so a batching publisher, such
   * as Kafka's, still sends asynchronously and waits once), inside an observation named {@value
   * #BATCH_NAME}; each message gets its own {@value #NAME} observation, a child of the batch's,
   * from the batch's start until the delegate answered for it, with the delegate's error for that
   * message recorded on it. Only the batch's observation is current while the delegate runs.
   */
  @Override
  public List<Throwable> publishAll(List<OutboxMessage> batch) throws Exception {
    Observation whole = Observation.createNotStarted(BATCH_NAME, registry)
        .contextualName("publish batch")
        .highCardinalityKeyValue("batch.size", Integer.toString(batch.size()));
    return whole.observeChecked(() -> {
      List<Observation> each = new ArrayList<>(batch.size());
      for (OutboxMessage m : batch) {
        each.add(observation(m).parentObservation(whole).start());
      }
      List<Throwable> outcomes;
      try {
        outcomes = delegate.publishAll(batch);
      } catch (Exception | Error e) {
        each.forEach(o -> o.lowCardinalityKeyValue("outcome", "error").error(e).stop());
        throw e;
      }
      // the relay counts a list of another size as the whole batch failed: so do the spans
      List<Throwable> errors = outcomes != null && outcomes.size() == batch.size() ? outcomes
          : Collections.nCopies(batch.size(), new IllegalStateException("the publisher answered for "
              + (outcomes == null ? "no" : outcomes.size()) + " of " + batch.size() + " messages"));
      for (int i = 0; i < each.size(); i++) {
        Throwable error = errors.get(i);
        if (error != null) {
          each.get(i).error(error);
        }
        each.get(i).lowCardinalityKeyValue("outcome", error == null ? "published" : "error").stop();
      }
      return outcomes;
    });
  }

  private Observation observation(OutboxMessage message) {
    String topic = message.topic() == null ? "unknown" : message.topic();
    Observation o = Observation.createNotStarted(NAME, registry)
        .contextualName("publish " + topic)
        .lowCardinalityKeyValue("topic", topic)
        .lowCardinalityKeyValue("hop", HOP)
        .highCardinalityKeyValue("message.id", String.valueOf(message.id()))
        .highCardinalityKeyValue("attempt", Integer.toString(message.attempt()));
    String intent = message.headers() == null ? null : message.headers().get(NewMessage.INTENT_HEADER);
    return intent == null ? o : o.highCardinalityKeyValue(ObservedExecutor.INTENT, intent);
  }
}
