package dev.idem.examples.kit;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.kafka.KafkaInbox;
import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.IdemTest;
import dev.idem.testing.KafkaTarget;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Repeats;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestKafka;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The kit against a Kafka consumer through a real broker in this JVM: idem's {@link KafkaInbox}
 * writing its effect on the batch's transaction passes every delivery, the kills included (the
 * consumer seeks back and applies the record again); one writing it on a connection of its own
 * fails where a kill separates the effect from the claim. Counts checked in the database.
 */
@IdemTest(poolSize = 12)
class RepeatsOverKafkaTest {
  private static TestKafka kafka;
  private static TestDatabase db;
  private static DataSource pool;
  private static FaultyDataSource faulty;
  private static Idem idem;

  @BeforeAll
  static void start(TestKafka broker, TestDatabase database, DataSource pool, FaultyDataSource service) {
    kafka = broker;
    db = database;
    db.execute(KitService.mariadb(db)
        ? "CREATE TABLE shipments (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
        : "CREATE TABLE shipments (id bigserial PRIMARY KEY, order_id text NOT NULL)");
    RepeatsOverKafkaTest.pool = pool;
    faulty = service;
    idem = Idem.builder(faulty).build();
  }

  /** A consumer of {@code topic} in group {@code topic}, applying {@code effect} through an inbox of that name. */
  private static KafkaInbox consumer(String topic, BatchEffect<ConsumerRecord<byte[], byte[]>> effect) {
    kafka.createTopic(topic, 1);
    KafkaInbox consumer = KafkaInbox.builder(idem.inbox(topic).build(), effect)
        .bootstrapServers(kafka.bootstrapServers()).groupId(topic).topics(topic)
        .deadLetterTopic(topic + ".dead").pollTimeout(Duration.ofMillis(100)).retryBackoff(Duration.ofMillis(50))
        .config(ConsumerConfig.METADATA_MAX_AGE_CONFIG, 1000).build();
    consumer.start();
    return consumer;
  }

  private static Repeats shipments(String topic) {
    return Repeats.of(Effects.in(pool, "shipments", "order_id"))
        .target(KafkaTarget.of(kafka.bootstrapServers(), topic, topic, copy -> {
          ProducerRecord<String, String> r = new ProducerRecord<>(topic, copy.intent(), copy.intent());
          r.headers().add("id", copy.key().getBytes(UTF_8)); // the message id the inbox dedupes by
          return r;
        }))
        .faults(faulty).concurrentCopies(4)
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT);
  }

  private static long shipmentRows(RepeatReport.Trial t) {
    return db.count("SELECT count(*) FROM shipments WHERE order_id = ?", t.intent());
  }

  @Test
  void kafkaInboxWritingOnTheBatchTransaction_oneShipmentPerOrderWhateverIsRepeatedOrKilled() {
    try (KafkaInbox consumer = consumer("kit-shipments", (tx, r) ->
        tx.dsl().execute("INSERT INTO shipments (order_id) VALUES (?)", new String(r.value(), UTF_8)))) {
      RepeatReport report = shipments("kit-shipments").run();
      System.out.println(report);

      report.assertOneEffectPerIntent();
      // every writing commit of a delivery killed before and after: the poll's range written before
      // the effect runs (idem_inbox_polls), the batch's own, and, once a kill made the partition
      // suspect, the attempts counted one record at a time (idem_inbox_attempts)
      List<String> trials = report.trials().stream().map(t -> t.delivery() + " " + t.variant()).toList();
      assertThat(trials).startsWith("CONCURRENT ", "REPLY_LOST ", "KILLED_BEFORE_COMMIT a clean delivery, nothing killed");
      List<String> kills = trials.subList(3, trials.size());
      assertThat(kills).isNotEmpty().allMatch(v -> v.matches("KILLED_(BEFORE|AFTER)_COMMIT writing commit \\d+ of \\d+"));
      assertThat(kills.stream().filter(v -> v.startsWith("KILLED_BEFORE_COMMIT")).count())
          .isEqualTo(kills.stream().filter(v -> v.startsWith("KILLED_AFTER_COMMIT")).count()).isGreaterThan(1);
      assertThat(report.trials()).allSatisfy(t -> {
        assertThat(shipmentRows(t)).isEqualTo(1);
        assertThat(t.steps()).allSatisfy(s -> assertThat(s.outcome()).contains("group kit-shipments committed past it"));
      });
    }
  }

  @Test
  void consumerWritingOnItsOwnConnection_failsWhenItsCommitIsKilledAfterCommitting() {
    try (KafkaInbox consumer = consumer("kit-shipments-own", (tx, r) -> {
      try (Connection own = faulty.getConnection();
          PreparedStatement ps = own.prepareStatement("INSERT INTO shipments (order_id) VALUES (?)")) {
        ps.setString(1, new String(r.value(), UTF_8));
        ps.executeUpdate();
      }
    })) {
      RepeatReport report = shipments("kit-shipments-own").deliver().run();
      System.out.println(report);

      // the shipment's own commit, killed after it committed: the one trial with two shipments (the
      // delivery comes again, and the insert on its own connection is not undone with the batch)
      List<RepeatReport.Trial> twice = report.trials().stream()
          .filter(t -> t.delivery() == KILLED_AFTER_COMMIT && shipmentRows(t) == 2).toList();
      assertThat(twice).hasSize(1);
      RepeatReport.Trial shipmentKilledAfter = twice.get(0);
      assertThat(report.failures()).contains(shipmentKilledAfter);
      for (RepeatReport.Trial t : report.trials()) {
        assertThat(shipmentRows(t)).as(t.delivery() + " " + t.variant()).isEqualTo(t.effects());
      }
      assertThatThrownBy(report::assertOneEffectPerIntent)
          .hasMessageContaining("FAIL KILLED_AFTER_COMMIT (" + shipmentKilledAfter.variant() + "), intent " + shipmentKilledAfter.intent()
              + ": 2 effects, want 1");
    }
  }
}
