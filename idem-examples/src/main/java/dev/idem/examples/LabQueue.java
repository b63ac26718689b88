package dev.idem.examples;

import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.kafka.KafkaPublisher;
import dev.idem.testing.TestKafka;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The queue between the outbox relay and the worker, at least once. A message stays on the queue
 * until the worker acknowledges it; a worker that fails (or crashes) before its ack gets it again,
 * and a lost ack ({@link Hop#QUEUE}'s fault) redelivers a message already handled. Each delivery
 * carries the message id the outbox minted, which is what an inbox dedupes by.
 *
 * <p>In process by default; with {@code --queue=kafka} ({@link Kind#KAFKA}) each published message
 * is a record on a real Kafka broker started in this JVM (one topic per run), sent by idem-kafka's
 * {@link KafkaPublisher} with its id in a header, and each delivery is a record a Kafka consumer
 * read back. A redelivery (no ack) is the same record handed out again, as a consumer that did not
 * commit gets it again.
 */
final class LabQueue implements AutoCloseable {
  /** Where the queue lives. */
  enum Kind {
    MEMORY, KAFKA
  }

  /** One delivery of a message. */
  record Delivery(String messageId, String topic, byte[] payload, Map<String, String> headers, int delivery) {}

  /** The kind of queue runs open; {@code --queue=} sets it for the process. */
  private static volatile Kind kind = Kind.MEMORY;
  /** One broker for the whole process, started by the first run over Kafka. */
  private static TestKafka broker;

  private final Deque<Delivery> ready = new ArrayDeque<>();
  private int published;
  private final KafkaPublisher kafka;
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final TopicPartition partition;

  private LabQueue(TestKafka broker) {
    if (broker == null) {
      kafka = null;
      consumer = null;
      partition = null;
      return;
    }
    String topic = "lab-" + UUID.randomUUID();
    broker.createTopic(topic, 1);
    partition = new TopicPartition(topic, 0);
    kafka = KafkaPublisher.builder(broker.bootstrapServers()).topics(outboxTopic -> topic).build();
    consumer = new KafkaConsumer<>(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers()),
        new ByteArrayDeserializer(), new ByteArrayDeserializer());
    consumer.assign(List.of(partition));
    consumer.seekToBeginning(List.of(partition));
  }

  static void use(Kind k) {
    kind = k;
  }

  static Kind kind() {
    return kind;
  }

  /** A new, empty queue of the {@linkplain #use kind} chosen. */
  static LabQueue open() {
    return new LabQueue(kind == Kind.KAFKA ? broker() : null);
  }

  private static synchronized TestKafka broker() {
    if (broker == null) {
      broker = TestKafka.start();
      TestKafka started = broker;
      Runtime.getRuntime().addShutdownHook(new Thread(started::close));
    }
    return broker;
  }

  /**
   * Stops the broker this process started, if any: its threads are not daemons, so without this
   * the JVM (and {@code exec:java}, which waits for them) never ends after the runs have printed.
   */
  static synchronized void stopBroker() {
    if (broker != null) {
      broker.close();
      broker = null;
    }
  }

  /** Publishes; over Kafka, returns once the broker acknowledged the record. */
  void publish(String messageId, String topic, byte[] payload, Map<String, String> headers) throws Exception {
    if (kafka != null) {
      kafka.publish(new Message(UUID.fromString(messageId), topic, null, payload, headers, Instant.now(), 1));
    } else {
      synchronized (this) {
        ready.addLast(new Delivery(messageId, topic, payload.clone(), Map.copyOf(headers), 1));
      }
    }
    synchronized (this) {
      published++;
    }
  }

  /** The next delivery, or null when the queue is empty. */
  synchronized Delivery poll() {
    if (ready.isEmpty() && consumer != null) {
      for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
        ready.addLast(delivery(r));
      }
    }
    return ready.pollFirst();
  }

  private static Delivery delivery(ConsumerRecord<byte[], byte[]> r) {
    Map<String, String> headers = new LinkedHashMap<>();
    String id = null;
    for (Header h : r.headers()) {
      String value = new String(h.value(), StandardCharsets.UTF_8);
      if (h.key().equals(KafkaPublisher.DEFAULT_ID_HEADER)) {
        id = value;
      } else {
        headers.put(h.key(), value);
      }
    }
    return new Delivery(id, r.topic(), r.value(), Map.copyOf(headers), 1);
  }

  /** Puts an unacknowledged (or "lost ack") delivery back, as a visibility timeout would. */
  synchronized void redeliver(Delivery d) {
    ready.addLast(new Delivery(d.messageId(), d.topic(), d.payload(), d.headers(), d.delivery() + 1));
  }

  /** Nothing left to hand out: over Kafka, also every record up to the end of the topic read. */
  synchronized boolean isEmpty() {
    if (!ready.isEmpty()) {
      return false;
    }
    return consumer == null || consumer.position(partition) >= consumer.endOffsets(List.of(partition)).get(partition);
  }

  synchronized int published() {
    return published;
  }

  @Override
  public synchronized void close() {
    if (consumer != null) {
      consumer.close();
      kafka.close();
    }
  }

  /** A message handed to the publisher directly, as the relay would hand it (OutboxMessage is built by idem's relay). */
  private record Message(java.util.UUID id, String topic, String aggregateKey, byte[] payload,
      java.util.Map<String, String> headers, java.time.Instant createdAt, int attempt) implements OutboxMessage {}
}
