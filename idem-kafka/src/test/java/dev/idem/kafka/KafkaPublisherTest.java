package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestKafka;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The relay to a real broker through {@link KafkaPublisher}: records counted on the topic, marks in the outbox table. */
@IdemTest(poolSize = 4)
class KafkaPublisherTest {
  static TestKafka kafka;
  static KafkaPublisher publisher;
  final TestDatabase db;
  final Idem idem;

  KafkaPublisherTest(TestDatabase db, Idem idem) {
    this.db = db;
    this.idem = idem;
  }

  @BeforeAll
  static void start() {
    kafka = Broker.shared();
    publisher = KafkaPublisher.builder(kafka.bootstrapServers()).build();
  }

  @AfterAll
  static void stop() {
    publisher.close();
  }

  @BeforeEach
  void clean() {
    db.execute("TRUNCATE idem_outbox");
  }

  static String text(byte[] b) {
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }

  static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    var h = r.headers().lastHeader(name);
    return h == null ? null : text(h.value());
  }

  @Test
  void eachMessageIsOneRecordCarryingItsIdItsKeyAsRecordKeyItsHeadersInOrderPerKey() {
    kafka.createTopic("pub-orders", 3);
    List<NewMessage> messages = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      messages.add(NewMessage.of("pub-orders", ("order " + i).getBytes(StandardCharsets.UTF_8))
          .withAggregateKey("customer-" + (i % 4)).withHeader("type", "OrderPlaced").withHeader("n", Integer.toString(i)));
    }
    List<UUID> ids = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), messages));
    Relay relay = idem.relay(publisher).batchSize(25).build();
    int sent = 0;
    for (int i = 0; i < 10 && sent < 60; i++) {
      sent += relay.runOnce();
    }
    assertThat(sent).isEqualTo(60);
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S' AND attempts = 1")).isEqualTo(60);

    List<ConsumerRecord<byte[], byte[]>> records = kafka.records("pub-orders");
    assertThat(records).hasSize(60);
    assertThat(records).extracting(r -> UUID.fromString(header(r, "id"))).containsExactlyInAnyOrderElementsOf(ids);
    Map<String, Integer> partitionOfKey = new HashMap<>();
    Map<String, Integer> lastOfKey = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      int n = Integer.parseInt(header(r, "n"));
      String key = text(r.key());
      assertThat(key).isEqualTo("customer-" + (n % 4));
      assertThat(text(r.value())).isEqualTo("order " + n);
      assertThat(header(r, "type")).isEqualTo("OrderPlaced");
      assertThat(header(r, "id")).isEqualTo(ids.get(n).toString());
      // one partition per key, and the key's messages in the order they were enqueued
      assertThat(partitionOfKey.computeIfAbsent(key, k -> r.partition())).isEqualTo(r.partition());
      assertThat(n).isGreaterThan(lastOfKey.getOrDefault(key, -1));
      lastOfKey.put(key, n);
    }
  }

  @Test
  void aMappedTopicAndAnIdHeaderOfTheUsersChoiceAreUsedAndAClashingHeaderParksOnlyItsMessage() throws Exception {
    kafka.createTopic("pub-mapped-kafka", 1);
    try (KafkaPublisher mapped = KafkaPublisher.builder(kafka.bootstrapServers())
        .topics(t -> t.equals("mapped") ? "pub-mapped-kafka" : null).idHeader("message-id").build()) {
      UUID good = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of("mapped", new byte[] {1})));
      UUID clash = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(),
          NewMessage.of("mapped", new byte[] {2}).withHeader("message-id", "mine")));
      UUID unmapped = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of("elsewhere", new byte[] {3})));
      Relay relay = idem.relay(mapped).maxAttempts(1).build();
      assertThat(relay.runOnce()).isEqualTo(1);

      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S' AND id = ?", good)).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X' AND id = ? AND last_error LIKE ?",
          clash, "%own header 'message-id', the header that carries its id%")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X' AND id = ? AND last_error LIKE ?",
          unmapped, "%gave no Kafka topic for outbox topic 'elsewhere'%")).isEqualTo(1);
      List<ConsumerRecord<byte[], byte[]>> records = kafka.records("pub-mapped-kafka");
      assertThat(records).hasSize(1);
      assertThat(header(records.get(0), "message-id")).isEqualTo(good.toString());
      assertThat(records.get(0).key()).isNull();
    }
  }

  @Test
  void aPublishThatKafkaDoesNotAcknowledgeInTimeFailsAndIsNotMarkedSent() throws Exception {
    // Nothing listens on this port: no acknowledgement ever comes.
    try (KafkaPublisher nowhere = KafkaPublisher.builder("127.0.0.1:1").deliveryTimeout(Duration.ofSeconds(1)).linger(Duration.ZERO).build()) {
      UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of("pub-nowhere", new byte[] {1})));
      assertThat(idem.relay(nowhere).build().runOnce()).isZero();
      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE id = ? AND status = 'P' AND attempts = 1 AND last_error IS NOT NULL", id))
          .isEqualTo(1);
    }
  }

  @Test
  void badSettingsAreRefusedNamingThem() {
    assertThatThrownBy(() -> KafkaPublisher.builder(" ")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bootstrapServers");
    KafkaPublisher.Builder b = KafkaPublisher.builder("127.0.0.1:1");
    assertThatThrownBy(() -> b.config(ProducerConfig.ACKS_CONFIG, "1")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("acks");
    assertThatThrownBy(() -> b.config(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false)).hasMessageContaining("enable.idempotence");
    assertThatThrownBy(() -> b.idHeader("")).hasMessageContaining("idHeader");
    assertThatThrownBy(() -> b.topics(null)).hasMessageContaining("topics");
    assertThatThrownBy(() -> KafkaPublisher.builder("x:1").deliveryTimeout(Duration.ZERO).build()).hasMessageContaining("deliveryTimeout");
    assertThatThrownBy(() -> KafkaPublisher.builder("x:1").deliveryTimeout(Duration.ofHours(1)).build()).hasMessageContaining("deliveryTimeout");
    assertThatThrownBy(() -> KafkaPublisher.builder("x:1").linger(Duration.ofSeconds(31)).build()).hasMessageContaining("linger");
  }
}
