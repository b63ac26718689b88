package dev.idem.testing;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Your Kafka consumer, reached through a real broker: each copy is produced to the topic (with
 * {@code acks=all}), and the attempt is over once your consumer group has committed an offset past
 * it, read with the admin client, so the effects are counted after your consumer has settled the
 * copy (redeliveries of its own included). Needs {@code org.apache.kafka:kafka-clients} on the
 * class path, which idem-testing does not bring (in a class of its own, so {@link Targets} and
 * {@link Repeats} load without it).
 *
 * <p>A {@link Delivery#REPLY_LOST} copy is the producer's retry after a lost acknowledgement: the
 * same record produced again. The producer and admin client are made at the first copy and closed
 * by {@link #close()} (which {@link Repeats#run()} calls at its end; the next run makes new ones).
 */
public final class KafkaTarget implements Target, AutoCloseable {
  /** The longest a copy waits for the group to commit past it, and for the broker to take it. */
  static final Duration CONSUMED_WITHIN = Duration.ofSeconds(30);

  private final String bootstrapServers;
  private final String topic;
  private final String group;
  private final Function<Copy, ProducerRecord<String, String>> record;
  private KafkaProducer<String, String> producer;
  private Admin admin;

  private KafkaTarget(String bootstrapServers, String topic, String group, Function<Copy, ProducerRecord<String, String>> record) {
    this.bootstrapServers = bootstrapServers;
    this.topic = topic;
    this.group = group;
    this.record = record;
  }

  /**
   * Copies produced to {@code topic} on {@code bootstrapServers}, as {@code record} makes them
   * (e.g. {@code copy.intent()} in the value and {@code copy.key()} in the header your consumer
   * takes its message id from), each settled once {@code consumerGroup} has committed past it.
   *
   * @throws IllegalArgumentException if an argument is null or blank
   */
  public static KafkaTarget of(String bootstrapServers, String topic, String consumerGroup,
      Function<Copy, ProducerRecord<String, String>> record) {
    for (String[] s : new String[][] {{bootstrapServers, "bootstrapServers"}, {topic, "topic"}, {consumerGroup, "consumerGroup"}}) {
      if (s[0] == null || s[0].isBlank()) {
        throw new IllegalArgumentException(s[1] + " is null or blank");
      }
    }
    return new KafkaTarget(bootstrapServers, topic, consumerGroup, Require.present(record, "record"));
  }

  @Override
  public Attempt send(Copy copy) throws InterruptedException {
    ProducerRecord<String, String> r = record.apply(copy);
    if (r == null || !topic.equals(r.topic())) {
      throw new IllegalArgumentException("the record function must make a record for topic " + topic + ", made "
          + (r == null ? "null" : "one for " + r.topic()) + " for " + copy);
    }
    RecordMetadata sent;
    try {
      sent = producer().send(r).get(CONSUMED_WITHIN.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException | TimeoutException e) {
      // Not taken by the broker, as far as the producer knows: a real producer sends it again.
      return Attempt.again("not produced: " + Require.describe(e instanceof ExecutionException ? e.getCause() : e));
    }
    TopicPartition tp = new TopicPartition(sent.topic(), sent.partition());
    String at = tp + "@" + sent.offset();
    OffsetAndMetadata[] committed = {null}; // the group's last answer, for the report
    boolean consumed = Poll.within(CONSUMED_WITHIN, Duration.ofMillis(20), () -> {
      try {
        committed[0] = admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
            .get(CONSUMED_WITHIN.toMillis(), TimeUnit.MILLISECONDS).get(tp);
      } catch (ExecutionException | TimeoutException e) {
        committed[0] = null;
        return false; // the coordinator may not be ready yet: ask again within the bound
      }
      return committed[0] != null && committed[0].offset() > sent.offset();
    });
    if (consumed) {
      return Attempt.done("produced at " + at + ", group " + group + " committed past it");
    }
    return Attempt.done("produced at " + at + "; group " + group + " did not commit past it within "
        + CONSUMED_WITHIN.toSeconds() + " s (committed: " + (committed[0] == null ? "nothing" : committed[0].offset()) + ")");
  }

  private synchronized KafkaProducer<String, String> producer() {
    if (producer == null) {
      producer = new KafkaProducer<>(Map.of(
          ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
          ProducerConfig.ACKS_CONFIG, "all",
          ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) CONSUMED_WITHIN.toMillis(),
          ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) CONSUMED_WITHIN.toMillis(),
          ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) CONSUMED_WITHIN.toMillis() / 2,
          ProducerConfig.LINGER_MS_CONFIG, 0), new StringSerializer(), new StringSerializer());
    }
    return producer;
  }

  private synchronized Admin admin() {
    if (admin == null) {
      admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers));
    }
    return admin;
  }

  /** Closes the producer and admin client, if made; a later copy makes new ones. */
  @Override
  public synchronized void close() {
    if (producer != null) {
      producer.close(Duration.ofSeconds(5));
      producer = null;
    }
    if (admin != null) {
      admin.close(Duration.ofSeconds(5));
      admin = null;
    }
  }

  @Override
  public String toString() {
    return "Kafka topic " + topic + " on " + bootstrapServers + ", consumed by group " + group;
  }
}
