package dev.idem.kafka;

import dev.idem.internal.Failures;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A relay's {@link Publisher} to Kafka: each outbox message becomes one record, its {@linkplain
 * OutboxMessage#id() id} in a header (by default {@value #DEFAULT_ID_HEADER}, the header Debezium's
 * outbox router writes), its aggregate key as the record key, its headers carried, its topic the
 * Kafka topic (or the one {@link Builder#topics} maps it to).
 *
 * <pre>{@code
 * try (KafkaPublisher kafka = KafkaPublisher.builder("broker:9092").build();
 *      Relay relay = idem.relay(kafka).batchSize(500).build()) {
 *   relay.start();
 *   ...
 * }
 * }</pre>
 *
 * <p>Guarantees: the producer is idempotent with {@code acks=all}, so a retry inside the producer
 * never writes a record twice and a record is acknowledged only once every in-sync replica has it.
 * Records of one aggregate key go to one partition, in the order they are sent. A relay batch is sent
 * at once and waited for once ({@link #publishAll}); the relay marks sent exactly the messages Kafka
 * acknowledged, and retries or parks the others as for any failed publish. The id is the one minted
 * when the message was enqueued, never one made here: a message relayed again (the relay crashed
 * after the send and before the mark) arrives as a new record with the same id, which {@link
 * KafkaInbox} absorbs.
 *
 * <p>Does not guarantee: one record per message. A republish after a relay crash, or after a send
 * whose acknowledgement was lost, writes another record; consumers deduplicate by the id header.
 * Order per key holds for messages sent in order: use the relay's {@code orderedByAggregateKey} if
 * a retried message must not overtake the next one of its key.
 *
 * <p>Thread-safe (the Kafka producer is). {@link #close()} closes the producer.
 */
public final class KafkaPublisher implements Publisher, AutoCloseable {
  /** The header carrying the outbox id unless {@link Builder#idHeader} says otherwise. */
  public static final String DEFAULT_ID_HEADER = "id";

  /** The longest {@linkplain Builder#deliveryTimeout delivery timeout}: ten minutes. */
  public static final Duration MAX_DELIVERY_TIMEOUT = Duration.ofMinutes(10);

  /** Producer settings this publisher decides; a {@link Builder#config} of one of them is refused. */
  private static final Set<String> OWN_SETTINGS = Set.of(
      ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
      ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
      ProducerConfig.ACKS_CONFIG,
      ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
      ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
      ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG,
      ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
      ProducerConfig.MAX_BLOCK_MS_CONFIG,
      ProducerConfig.LINGER_MS_CONFIG,
      ProducerConfig.TRANSACTIONAL_ID_CONFIG);

  private final KafkaProducer<byte[], byte[]> producer;
  private final Function<String, String> topics;
  private final String idHeader;
  private final Duration deliveryTimeout;
  /** The longest a publish waits for its acknowledgement: the delivery timeout and a margin. */
  private final long waitMillis;

  private KafkaPublisher(Builder b) {
    Map<String, Object> config = new HashMap<>(b.config);
    // publishAll hands the producer a whole relay batch and flushes it at once: producer batches
    // of 256 KiB (Kafka's default is 16 KiB) carry it in a few requests instead of dozens, about
    // four times the throughput in idem-benchmarks' KafkaThroughput. A user's setting wins.
    config.putIfAbsent(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
    config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrapServers);
    config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    config.put(ProducerConfig.ACKS_CONFIG, "all");
    long delivery = b.deliveryTimeout.toMillis();
    long linger = b.linger.toMillis();
    // Kafka requires delivery >= linger + request timeout; half of what is left for one request
    // leaves room for a retry inside the delivery timeout.
    config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) delivery);
    config.put(ProducerConfig.LINGER_MS_CONFIG, (int) linger);
    config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) Math.max(1, (delivery - linger) / 2));
    // A send blocks (on metadata, on a full buffer) at most this long: the relay's batch is bounded.
    config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, delivery);
    this.producer = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    this.topics = b.topics;
    this.idHeader = b.idHeader;
    this.deliveryTimeout = b.deliveryTimeout;
    this.waitMillis = deliveryTimeout.toMillis() + WAIT_MARGIN_MS;
  }

  /** Starts configuring a publisher to the Kafka cluster at {@code bootstrapServers} ({@code host:port,...}). */
  public static Builder builder(String bootstrapServers) {
    return new Builder(bootstrapServers);
  }

  /** Sends one message and waits for Kafka's acknowledgement, at most the delivery timeout. */
  @Override
  public void publish(OutboxMessage message) throws Exception {
    Future<?> sent = producer.send(record(message));
    try {
      sent.get(waitMillis, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw failure(e);
    }
  }

  /**
   * Sends the whole batch without waiting, then waits once for Kafka to acknowledge or refuse each
   * record (each within the delivery timeout). A message whose record cannot even be made (a topic
   * the mapping refuses, a header named like the id header) fails alone.
   */
  @Override
  public List<Throwable> publishAll(List<OutboxMessage> batch) {
    List<Future<?>> sends = new ArrayList<>(batch.size());
    List<Throwable> outcomes = new ArrayList<>(batch.size());
    for (OutboxMessage m : batch) {
      try {
        sends.add(producer.send(record(m)));
        outcomes.add(null);
      } catch (RuntimeException e) {
        sends.add(null);
        outcomes.add(e);
      }
    }
    producer.flush();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMillis);
    for (int i = 0; i < sends.size(); i++) {
      Future<?> sent = sends.get(i);
      if (sent == null) {
        continue;
      }
      try {
        sent.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        outcomes.set(i, failure(e));
      } catch (TimeoutException e) {
        outcomes.set(i, e);
      } catch (InterruptedException e) {
        // Closing relay: the messages not yet confirmed count as not sent, and go out again later.
        Thread.currentThread().interrupt();
        for (int j = i; j < sends.size(); j++) {
          if (outcomes.get(j) == null) {
            outcomes.set(j, e);
          }
        }
        break;
      }
    }
    return outcomes;
  }

  /** Past the delivery timeout, by which Kafka completes every send: a bound for a lost callback. */
  private static final long WAIT_MARGIN_MS = 5_000;

  private ProducerRecord<byte[], byte[]> record(OutboxMessage m) {
    String topic;
    try {
      topic = topics.apply(m.topic());
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("the topic mapping failed for outbox topic '" + m.topic() + "': " + e, e);
    }
    if (topic == null || topic.isBlank()) {
      throw new IllegalArgumentException("the topic mapping gave no Kafka topic for outbox topic '" + m.topic() + "'");
    }
    RecordHeaders headers = new RecordHeaders();
    headers.add(idHeader, m.id().toString().getBytes(StandardCharsets.UTF_8));
    for (Map.Entry<String, String> h : m.headers().entrySet()) {
      if (h.getKey().equals(idHeader)) {
        // Two values for the id header: a consumer could take either, so refuse rather than guess.
        throw new IllegalArgumentException("outbox message " + m.id() + " has its own header '" + idHeader
            + "', the header that carries its id; rename the header or choose another idHeader");
      }
      headers.add(h.getKey(), h.getValue() == null ? null : h.getValue().getBytes(StandardCharsets.UTF_8));
    }
    byte[] key = m.aggregateKey() == null ? null : m.aggregateKey().getBytes(StandardCharsets.UTF_8);
    return new ProducerRecord<>(topic, null, key, m.payload(), headers);
  }

  /** The cause Kafka reports, or the wrapper if it has none; a fatal error is rethrown. */
  static Exception failure(ExecutionException e) {
    Throwable cause = e.getCause();
    if (cause instanceof Exception c) {
      return c;
    }
    if (cause != null) {
      Failures.rethrowIfFatal(cause);
    }
    return e;
  }

  /** Closes the producer, waiting at most the delivery timeout for records still in flight. */
  @Override
  public void close() {
    producer.close(deliveryTimeout);
  }

  /** Configures a {@link KafkaPublisher}; validated in {@link #build()}. */
  public static final class Builder {
    private final String bootstrapServers;
    private final Map<String, Object> config = new HashMap<>();
    private Function<String, String> topics = Function.identity();
    private String idHeader = DEFAULT_ID_HEADER;
    private Duration deliveryTimeout = Duration.ofSeconds(30);
    private Duration linger = Duration.ofMillis(5);

    private Builder(String bootstrapServers) {
      this.bootstrapServers = Require.notBlank(bootstrapServers, "bootstrapServers");
    }

    /**
     * Maps an outbox topic to the Kafka topic its records go to; default: the same name. A mapping
     * that throws or gives a blank topic fails that message's publish (retried, then parked).
     */
    public Builder topics(Function<String, String> topics) {
      this.topics = Require.notNull(topics, "topics");
      return this;
    }

    /** The record header carrying the outbox id; default {@value KafkaPublisher#DEFAULT_ID_HEADER}. */
    public Builder idHeader(String idHeader) {
      this.idHeader = Require.notBlank(idHeader, "idHeader");
      return this;
    }

    /**
     * How long Kafka may take to acknowledge a record, retries included, before its publish counts
     * as failed; also the longest a send blocks for metadata or buffer space. Default 30 s, at most
     * {@link KafkaPublisher#MAX_DELIVERY_TIMEOUT}; keep it below the relay's shutdown timeout so a
     * closing relay is not left waiting.
     */
    public Builder deliveryTimeout(Duration deliveryTimeout) {
      this.deliveryTimeout = deliveryTimeout;
      return this;
    }

    /** How long the producer gathers records into one request; default 5 ms. */
    public Builder linger(Duration linger) {
      this.linger = linger;
      return this;
    }

    /**
     * Any other producer setting (security, compression, batch size...). The settings this
     * publisher decides are refused: bootstrap servers, idempotence, acks, serializers, timeouts,
     * linger, and a transactional id.
     */
    public Builder config(String name, Object value) {
      Require.notBlank(name, "config name");
      if (OWN_SETTINGS.contains(name)) {
        throw new IllegalArgumentException("the producer setting " + name
            + " is decided by KafkaPublisher (idempotent, acks=all, byte[] records, its timeouts); use its builder's methods");
      }
      config.put(name, Require.notNull(value, "config value of " + name));
      return this;
    }

    /**
     * Checks the settings and creates the producer.
     *
     * @throws IllegalArgumentException naming the setting: a delivery timeout that is not positive
     *     or past {@link KafkaPublisher#MAX_DELIVERY_TIMEOUT}, a linger that is negative or not
     *     shorter than the delivery timeout
     */
    public KafkaPublisher build() {
      Require.atMost(Require.positive(deliveryTimeout, "deliveryTimeout"), MAX_DELIVERY_TIMEOUT, "deliveryTimeout", "idem's limit");
      Require.notNegative(linger, "linger");
      if (linger.compareTo(deliveryTimeout) >= 0) {
        throw new IllegalArgumentException("linger " + linger + " must be shorter than the deliveryTimeout " + deliveryTimeout);
      }
      return new KafkaPublisher(this);
    }
  }
}
