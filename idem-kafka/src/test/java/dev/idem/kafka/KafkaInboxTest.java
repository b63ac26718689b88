package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.reconcile.TwoIdsForOneIntent;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestKafka;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link KafkaInbox} against a real broker and database: effects counted per message id in the
 * database, records counted on the topics. {@code effects} has no unique index: a second effect shows.
 */
@IdemTest(poolSize = 8, sql = "CREATE TABLE effects (message_id text NOT NULL, payload text NOT NULL, thread text NOT NULL)")
class KafkaInboxTest {
  static TestKafka kafka;
  static KafkaPublisher publisher;
  static KafkaProducer<byte[], byte[]> producer;
  final TestDatabase db;
  final Idem idem;

  KafkaInboxTest(TestDatabase db, Idem idem) {
    this.db = db;
    this.idem = idem;
  }

  @BeforeAll
  static void start() {
    kafka = Broker.shared();
    publisher = KafkaPublisher.builder(kafka.bootstrapServers()).build();
    producer = new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()),
        new ByteArraySerializer(), new ByteArraySerializer());
  }

  @AfterAll
  static void stop() {
    producer.close();
    publisher.close();
  }

  @BeforeEach
  void clean() {
    db.execute("TRUNCATE effects; TRUNCATE idem_outbox");
  }

  /** The effect: one row per application, written in the inbox's transaction. */
  static final BatchEffect<ConsumerRecord<byte[], byte[]>> RECORD = (tx, r) -> {
    try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effects VALUES (?, ?, ?)")) {
      var id = r.headers().lastHeader("id");
      ps.setString(1, id == null ? KafkaInbox.position(r) : new String(id.value(), StandardCharsets.UTF_8));
      ps.setString(2, new String(r.value(), StandardCharsets.UTF_8));
      ps.setString(3, Thread.currentThread().getName());
      ps.executeUpdate();
    }
  };

  static KafkaInbox.Builder consumer(Inbox inbox, BatchEffect<ConsumerRecord<byte[], byte[]>> effect, String group, String topic) {
    return KafkaInbox.builder(inbox, effect).bootstrapServers(kafka.bootstrapServers()).groupId(group).topics(topic)
        .deadLetterTopic(topic + ".dead").pollTimeout(Duration.ofMillis(100)).retryBackoff(Duration.ofMillis(50))
        .config(ConsumerConfig.METADATA_MAX_AGE_CONFIG, 1000);
  }

  List<UUID> enqueue(String topic, int n, String prefix) {
    List<NewMessage> messages = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      messages.add(NewMessage.of(topic, (prefix + i).getBytes(StandardCharsets.UTF_8)).withAggregateKey("k" + (i % 8)));
    }
    return idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), messages));
  }

  /** One message whose value is {@code poison}, its id. */
  UUID enqueuePoison(String topic) {
    return idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of(topic, "poison".getBytes(StandardCharsets.UTF_8))));
  }

  void relayAll(int n) {
    Relay relay = idem.relay(publisher).batchSize(500).build();
    int sent = 0;
    for (int i = 0; i < 100 && sent < n; i++) {
      sent += relay.runOnce();
    }
    assertThat(sent).isEqualTo(n);
  }

  long effects() {
    return db.count("SELECT count(*) FROM effects");
  }

  long idsAppliedMoreThanOnce() {
    return db.count("SELECT count(*) FROM (SELECT message_id FROM effects GROUP BY message_id HAVING count(*) > 1) t");
  }

  @Test
  void relayedMessagesApplyOnceEachAndCopiesWithTheSameIdAtNewOffsetsAreAbsorbed() throws Exception {
    kafka.createTopic("in-orders", 3);
    List<UUID> ids = enqueue("in-orders", 300, "order ");
    relayAll(300);
    // A republish: the same ids again, as new records at new offsets.
    for (ConsumerRecord<byte[], byte[]> r : kafka.records("in-orders").subList(0, 100)) {
      producer.send(new ProducerRecord<>("in-orders", null, r.key(), r.value(), r.headers())).get();
    }
    assertThat(kafka.records("in-orders")).hasSize(400);

    try (KafkaInbox c = consumer(idem.inbox("orders").build(), RECORD, "orders", "in-orders").build()) {
      c.start();
      Poll.until("300 effects and the group's offsets at the end", () -> effects() == 300 && committedToEnd("orders", "in-orders"));
    }
    assertThat(effects()).isEqualTo(300);
    assertThat(idsAppliedMoreThanOnce()).isZero();
    // every effect's id is one the outbox minted (an IN list of their text: no arrays on MariaDB)
    assertThat(db.count("SELECT count(DISTINCT message_id) FROM effects WHERE message_id IN ("
        + String.join(", ", Collections.nCopies(ids.size(), "?")) + ")", ids.stream().map(UUID::toString).toArray())).isEqualTo(300);
  }

  @Test
  void theIntentTravelsAsAHeader_theInboxRecordsIt_andARepublishWithANewIdIsReported() throws Exception {
    kafka.createTopic("in-lineage", 1);
    IdempotencyKey order = IdempotencyKey.of("shop", "order-77");
    idem.executor().build().execute(order, Fingerprint.of("77"), Codec.utf8(), tx -> {
      idem.outbox().enqueue(NewMessage.of("in-lineage", "placed".getBytes(StandardCharsets.UTF_8)));
      return "placed";
    });
    relayAll(1);
    ConsumerRecord<byte[], byte[]> sent = kafka.records("in-lineage").get(0);
    assertThat(new String(sent.headers().lastHeader(NewMessage.INTENT_HEADER).value(), StandardCharsets.UTF_8))
        .isEqualTo("shop:order-77");
    // upstream, a republish that minted a new id for the same intent
    var copy = new org.apache.kafka.common.header.internals.RecordHeaders(sent.headers().toArray());
    copy.remove("id");
    copy.add("id", UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8));
    producer.send(new ProducerRecord<>("in-lineage", null, sent.key(), sent.value(), copy)).get();

    try (KafkaInbox c = consumer(idem.inbox("lineage").build(), RECORD, "lineage", "in-lineage").build()) {
      c.start();
      Poll.until("2 effects and the group's offsets at the end", () -> effects() == 2 && committedToEnd("lineage", "in-lineage"));
    }
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'lineage' AND intent = 'shop:order-77'")).isEqualTo(2);
    List<TwoIdsForOneIntent> found = idem.lineage().check(Duration.ofMinutes(10)).stream()
        .filter(f -> f.at().equals("lineage")).toList();
    assertThat(found).hasSize(1);
    assertThat(found.get(0).intent()).isEqualTo("shop:order-77");
    assertThat(found.get(0).messageIds()).hasSize(2);
  }

  @Test
  void aPoisonMessageGoesToTheDeadLetterTopicAfterMaxAttemptsAndTheOthersApplyOnce() throws Exception {
    kafka.createTopic("in-poison", 1);
    enqueue("in-poison", 5, "fine ");
    UUID poison = enqueuePoison("in-poison");
    enqueue("in-poison", 5, "after ");
    relayAll(11);
    AtomicInteger poisonRuns = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = (tx, r) -> {
      RECORD.apply(tx, r); // written, then rolled back with the failure
      if (new String(r.value(), StandardCharsets.UTF_8).equals("poison")) {
        poisonRuns.incrementAndGet();
        throw new IllegalStateException("cannot ship poison");
      }
    };
    UUID secondPoison;
    try (KafkaInbox c = consumer(idem.inbox("poison").build(), effect, "poison", "in-poison").maxAttempts(3).build()) {
      c.start();
      Poll.until("the dead letter and the offsets at the end", () -> committedToEnd("poison", "in-poison"));
      assertThat(poisonRuns).hasValue(3);
      c.close();
      // started again, it still keeps dead letters (its dead-letter producer is made per start)
      secondPoison = enqueuePoison("in-poison");
      relayAll(1);
      c.start();
      Poll.until("the second dead letter", () -> committedToEnd("poison", "in-poison"));
    }
    assertThat(poisonRuns).hasValue(6);
    assertThat(effects()).isEqualTo(10);
    assertThat(idsAppliedMoreThanOnce()).isZero();
    assertThat(db.count("SELECT count(*) FROM effects WHERE message_id = ?", poison.toString())).isZero();
    List<ConsumerRecord<byte[], byte[]>> dead = kafka.records("in-poison.dead");
    assertThat(dead).hasSize(2);
    assertThat(KafkaPublisherTest.header(dead.get(1), "id")).isEqualTo(secondPoison.toString());
    assertThat(KafkaPublisherTest.header(dead.get(0), "id")).isEqualTo(poison.toString());
    assertThat(KafkaPublisherTest.header(dead.get(0), DeadLetters.ERROR_HEADER)).contains("cannot ship poison");
    assertThat(KafkaPublisherTest.header(dead.get(0), DeadLetters.ORIGIN_HEADER)).isEqualTo("in-poison-0@5");
  }

  /**
   * A record that fails in one partition slows only its own partition: the other partition's records
   * keep going in batches (counted as the inbox transactions that applied them: a few, not one per
   * record), are never charged an attempt nor counted as delivered twice, and the failing record is
   * dead-lettered after maxAttempts runs.
   */
  @Test
  void aFailingRecordInOnePartitionLeavesTheOtherPartitionsBatchesAlone() throws Exception {
    kafka.createTopic("in-split", 2);
    String poison = UUID.randomUUID().toString();
    send("in-split", 0, poison, "poison");
    for (int i = 0; i < 5; i++) {
      send("in-split", 0, UUID.randomUUID().toString(), "after the poison " + i); // applied, then polled again
    }
    int good = 300;
    for (int i = 0; i < good; i++) {
      send("in-split", 1, UUID.randomUUID().toString(), "good " + i);
    }
    AtomicInteger poisonRuns = new AtomicInteger();
    // the transactions (one per inbox batch) that applied good records; the loop's thread only
    java.util.Set<Object> goodBatches = Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    AtomicInteger goodRunAlone = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = (tx, r) -> {
      if (new String(r.value(), StandardCharsets.UTF_8).equals("poison")) {
        poisonRuns.incrementAndGet();
        throw new IllegalStateException("cannot ship poison");
      }
      RECORD.apply(tx, r);
      if (r.partition() == 1) {
        goodBatches.add(tx);
        // an attempt counted before the effect: this record was run alone (slowed by the poison)
        try (PreparedStatement ps = tx.connection().prepareStatement("SELECT count(*) FROM idem_inbox_attempts"
            + " WHERE consumer_group = 'split' AND record_partition = 1 AND record_offset = ? AND attempts > 0")) {
          ps.setLong(1, r.offset());
          try (var rs = ps.executeQuery()) {
            rs.next();
            goodRunAlone.addAndGet(rs.getInt(1));
          }
        }
      }
    };
    try (KafkaInbox c = consumer(idem.inbox("split").build(), effect, "split", "in-split").maxAttempts(3).maxPollRecords(20)
        // small fetches, so that polls mix both partitions' records
        .config(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1024).build()) {
      c.start();
      Poll.until("the dead letter, the good records applied and the offsets at the end",
          () -> effects() == good + 5 && committedToEnd("split", "in-split"));
    }
    assertThat(effects()).isEqualTo(good + 5);
    assertThat(idsAppliedMoreThanOnce()).isZero();
    assertThat(db.count("SELECT count(*) FROM effects WHERE message_id = ?", poison)).isZero();
    assertThat(poisonRuns).hasValue(3);
    assertThat(db.count("SELECT attempts FROM idem_inbox_attempts WHERE consumer_group = 'split' AND message_id = ? AND state = 'D'",
        poison)).isEqualTo(3);
    assertThat(kafka.records("in-split.dead")).hasSize(1);
    assertThat(goodRunAlone).as("records of the good partition run alone").hasValue(0);
    // 300 records at most 20 a poll: 15 batches at least; one record a poll would be 300
    assertThat(goodBatches.size()).as("inbox batches that applied the good partition's records").isBetween(15, 60);
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'split' AND record_partition = 1"
        + " AND (attempts > 0 OR deliveries > 1 OR state <> 'A')")).isZero();
    // the records applied after the poison were never charged: only the poison has attempts
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'split' AND attempts > 0")).isEqualTo(1);
  }

  /** Writes one record with id {@code id} to {@code partition} of {@code topic}. */
  void send(String topic, int partition, String id, String value) throws Exception {
    producer.send(new ProducerRecord<byte[], byte[]>(topic, partition, (byte[]) null, value.getBytes(StandardCharsets.UTF_8),
        List.of(new RecordHeader("id", id.getBytes(StandardCharsets.UTF_8))))).get();
  }

  /**
   * A failing record's attempts are in the database: a new consumer of the group (a restart)
   * continues from the first one's count instead of from zero, so the effect runs maxAttempts (3)
   * times in all before the dead letter, and a third consumer neither runs it nor dead-letters it
   * again.
   */
  @Test
  void aFailingRecordsAttemptsSurviveANewConsumerOfTheGroupAndItStaysDeadLettered() throws Exception {
    kafka.createTopic("in-restart", 1);
    enqueue("in-restart", 2, "fine ");
    UUID poison = enqueuePoison("in-restart");
    relayAll(3);
    AtomicInteger poisonRuns = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = (tx, r) -> {
      if (new String(r.value(), StandardCharsets.UTF_8).equals("poison")) {
        poisonRuns.incrementAndGet();
        throw new IllegalStateException("cannot ship poison");
      }
      RECORD.apply(tx, r);
    };
    String row = "SELECT attempts FROM idem_inbox_attempts WHERE consumer_group = 'restart' AND message_id = ?";
    String attemptedOnce = "SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'restart' AND message_id = ? AND attempts = 1";
    // The first consumer fails once and waits its (long) back-off: then it is stopped.
    try (KafkaInbox c = consumer(idem.inbox("restart").build(), effect, "restart", "in-restart").maxAttempts(3)
        .retryBackoff(KafkaInbox.MAX_POLL_TIMEOUT).build()) {
      c.start();
      Poll.until("the first failure counted", () -> db.count(attemptedOnce, poison.toString()) == 1);
    }
    assertThat(poisonRuns).hasValue(1);
    try (KafkaInbox c = consumer(idem.inbox("restart").build(), effect, "restart", "in-restart").maxAttempts(3).build()) {
      c.start();
      Poll.until("the dead letter and the offsets at the end", () -> committedToEnd("restart", "in-restart"));
    }
    assertThat(poisonRuns).as("3 runs in all, not 3 per consumer").hasValue(3);
    assertThat(db.count(row, poison.toString())).isEqualTo(3);
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'restart' AND state = 'D'")).isEqualTo(1);
    assertThat(kafka.records("in-restart.dead")).hasSize(1);
    assertThat(db.count("SELECT count(*) FROM effects WHERE message_id = ?", poison.toString())).isZero();
    assertThat(effects()).isEqualTo(2);

    // Offsets back to the start: the dead letter is recognised, not run or dead-lettered again.
    Offsets.rewind(kafka, "restart", "in-restart");
    try (KafkaInbox c = consumer(idem.inbox("restart").build(), effect, "restart", "in-restart").maxAttempts(3).build()) {
      c.start();
      Poll.until("the offsets at the end again", () -> committedToEnd("restart", "in-restart"));
    }
    assertThat(poisonRuns).hasValue(3);
    assertThat(kafka.records("in-restart.dead")).hasSize(1);
    assertThat(effects()).isEqualTo(2);
  }

  /**
   * A record given up on (planted: its poll's range and its delivery counted and its one attempt
   * used, as by a consumer that died in it) whose effect had committed (its id in the inbox) is acknowledged as a
   * duplicate: no dead letter, no second effect, and its row says so ({@code E}).
   */
  @Test
  void aRecordGivenUpOnWhoseEffectCommittedIsAcknowledgedAndNotDeadLettered() throws Exception {
    kafka.createTopic("in-committed", 1);
    String id = UUID.randomUUID().toString();
    Inbox inbox = idem.inbox("committed").build();
    inbox.receive(id, tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effects VALUES (?, 'applied', 'planted')")) {
        ps.setString(1, id);
        ps.executeUpdate();
      }
    });
    producer.send(new ProducerRecord<byte[], byte[]>("in-committed", null, null, "again".getBytes(StandardCharsets.UTF_8),
        List.of(new org.apache.kafka.common.header.internals.RecordHeader("id", id.getBytes(StandardCharsets.UTF_8))))).get();
    db.execute("INSERT INTO idem_inbox_attempts (consumer_group, topic, record_partition, record_offset, message_id, deliveries,"
        + " attempts, state, last_attempt_at) VALUES ('committed', 'in-committed', 0, 0, '" + id + "', 1, 1, 'A', CURRENT_TIMESTAMP)");
    // its poll's range, delivered once before it ran alone and once for that run
    db.execute("INSERT INTO idem_inbox_polls (consumer_group, topic, record_partition, first_offset, last_offset, deliveries,"
        + " given_up_offset) VALUES ('committed', 'in-committed', 0, 0, 0, 2, -1)");
    try (KafkaInbox c = consumer(inbox, RECORD, "committed", "in-committed").maxAttempts(1).build()) {
      c.start();
      Poll.until("the offsets at the end", () -> committedToEnd("committed", "in-committed"));
    }
    assertThat(kafka.records("in-committed.dead")).isEmpty();
    assertThat(db.count("SELECT count(*) FROM effects WHERE message_id = ?", id)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'committed' AND message_id = ? AND state = 'E'", id))
        .isEqualTo(1);
  }

  /**
   * A poll without a fault writes one row per partition (its range of offsets, committed before the
   * batch's effects run) and none per record: each batch finds its records inside its partition's
   * range, delivered once, and no attempt row exists, during the run or after it.
   */
  @Test
  void aPollWritesOneRangeRowPerPartitionAndNoRowPerRecord() throws Exception {
    kafka.createTopic("in-ranges", 2);
    enqueue("in-ranges", 200, "ranged ");
    relayAll(200);
    AtomicInteger outsideItsRange = new AtomicInteger();
    AtomicInteger attemptRows = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = (tx, r) -> {
      RECORD.apply(tx, r);
      try (PreparedStatement ps = tx.connection().prepareStatement("SELECT count(*) FROM idem_inbox_polls WHERE consumer_group ="
          + " 'ranges' AND topic = 'in-ranges' AND record_partition = ? AND ? BETWEEN first_offset AND last_offset AND deliveries = 1")) {
        ps.setInt(1, r.partition());
        ps.setLong(2, r.offset());
        try (var rs = ps.executeQuery()) {
          rs.next();
          if (rs.getInt(1) != 1) {
            outsideItsRange.incrementAndGet();
          }
        }
      }
      try (PreparedStatement ps = tx.connection().prepareStatement("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'ranges'")) {
        try (var rs = ps.executeQuery()) {
          rs.next();
          attemptRows.addAndGet(rs.getInt(1));
        }
      }
    };
    try (KafkaInbox c = consumer(idem.inbox("ranges").build(), effect, "ranges", "in-ranges").maxPollRecords(30).build()) {
      c.start();
      Poll.until("200 effects and the offsets at the end", () -> effects() == 200 && committedToEnd("ranges", "in-ranges"));
    }
    assertThat(effects()).isEqualTo(200);
    assertThat(outsideItsRange).as("records applied outside their partition's range, delivered once").hasValue(0);
    assertThat(attemptRows).as("attempt rows seen by the effects").hasValue(0);
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'ranges'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox_polls WHERE consumer_group = 'ranges'")).isEqualTo(2);
    // each partition's row holds its last poll: ending at the partition's last record, delivered once
    for (int partition = 0; partition < 2; partition++) {
      int p = partition;
      long last = kafka.records("in-ranges").stream().filter(r -> r.partition() == p).mapToLong(ConsumerRecord::offset).max().orElseThrow();
      assertThat(db.count("SELECT count(*) FROM idem_inbox_polls WHERE consumer_group = 'ranges' AND record_partition = ?"
          + " AND last_offset = ? AND deliveries = 1 AND given_up_offset = -1", p, last)).isEqualTo(1);
    }
  }

  @Test
  void aRecordWithoutAnIdIsADeadLetterByDefaultAndAppliesOnceByPositionWhenChosen() throws Exception {
    kafka.createTopic("in-noid", 1);
    producer.send(new ProducerRecord<>("in-noid", "no id".getBytes(StandardCharsets.UTF_8))).get();
    List<org.apache.kafka.common.header.Header> badId =
        List.of(new org.apache.kafka.common.header.internals.RecordHeader("id", "tab\tin id".getBytes(StandardCharsets.UTF_8)));
    producer.send(new ProducerRecord<byte[], byte[]>("in-noid", null, null, "bad id".getBytes(StandardCharsets.UTF_8), badId)).get();

    try (KafkaInbox c = consumer(idem.inbox("noid").build(), RECORD, "noid", "in-noid").build()) {
      c.start();
      Poll.until("both records settled", () -> committedToEnd("noid", "in-noid"));
    }
    assertThat(effects()).isZero();
    List<ConsumerRecord<byte[], byte[]>> dead = kafka.records("in-noid.dead");
    assertThat(dead).extracting(r -> KafkaPublisherTest.header(r, DeadLetters.ERROR_HEADER))
        .satisfiesExactly(
            e -> assertThat(e).contains(MissingIdException.class.getName()).contains("has no 'id' header"),
            e -> assertThat(e).contains("control character"));

    try (KafkaInbox c = consumer(idem.inbox("noid-position").build(), RECORD, "noid-position", "in-noid")
        .withoutId(KafkaInbox.WithoutId.POSITION).build()) {
      c.start();
      Poll.until("both records applied", () -> committedToEnd("noid-position", "in-noid"));
    }
    assertThat(effects()).isEqualTo(2);
    assertThat(kafka.records("in-noid.dead")).hasSize(2); // none more
  }

  @Test
  void twoConsumersOfOneGroupRacingThroughRebalancesApplyEachMessageOnce() throws Exception {
    kafka.createTopic("in-race", 4);
    int n = 2000;
    enqueue("in-race", n, "race ");
    Relay relay = idem.relay(publisher).batchSize(200).pollInterval(Duration.ofMillis(20)).build();
    Inbox inbox = idem.inbox("race").build();
    KafkaInbox.Builder b = consumer(inbox, RECORD, "race", "in-race").maxPollRecords(50);
    KafkaInbox a = b.threadFactory(r -> new Thread(r, "consumer-a")).build();
    KafkaInbox second = b.threadFactory(r -> new Thread(r, "consumer-b")).build();
    try (relay; a; second) {
      a.start();
      relay.start();
      Poll.until("some effects", () -> effects() > 100);
      second.start(); // a rebalance while a consumes
      Poll.until("more effects", () -> effects() > 600);
      a.close(); // its partitions move to second mid-stream
      Poll.until("more effects", () -> effects() > 1200);
      a.start(); // and back
      Poll.until(n + " effects", () -> effects() == n && committedToEnd("race", "in-race"));
    }
    assertThat(effects()).isEqualTo(n);
    assertThat(idsAppliedMoreThanOnce()).isZero();
    assertThat(db.count("SELECT count(DISTINCT thread) FROM effects")).isEqualTo(2); // both consumed
  }

  @Test
  void badSettingsAreRefusedNamingThem() {
    Inbox inbox = idem.inbox("settings").build();
    assertThatThrownBy(() -> KafkaInbox.builder(null, RECORD)).hasMessageContaining("inbox");
    assertThatThrownBy(() -> KafkaInbox.builder(inbox, null)).hasMessageContaining("effect");
    assertThatThrownBy(() -> KafkaInbox.builder(inbox, RECORD).groupId("g").topics("t").deadLetterTopic("d").build())
        .hasMessageContaining("bootstrapServers");
    assertThatThrownBy(() -> KafkaInbox.builder(inbox, RECORD).bootstrapServers("x:1").topics("t").deadLetterTopic("d").build())
        .hasMessageContaining("groupId");
    assertThatThrownBy(() -> KafkaInbox.builder(inbox, RECORD).bootstrapServers("x:1").groupId("g").deadLetterTopic("d").build())
        .hasMessageContaining("topics");
    assertThatThrownBy(() -> KafkaInbox.builder(inbox, RECORD).bootstrapServers("x:1").groupId("g").topics("t").build())
        .hasMessageContaining("deadLetters");
    KafkaInbox.Builder ok = KafkaInbox.builder(inbox, RECORD).bootstrapServers("x:1").groupId("g").topics("t").deadLetters((r, e) -> {});
    assertThatThrownBy(() -> ok.config(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, true)).hasMessageContaining("enable.auto.commit");
    assertThatThrownBy(() -> ok.topics("t", " ")).hasMessageContaining("topics[1]");
    assertThatThrownBy(() -> ok.maxAttempts(0).build()).hasMessageContaining("maxAttempts");
    ok.maxAttempts(3);
    assertThatThrownBy(() -> ok.maxPollRecords(10_001).build()).hasMessageContaining("maxPollRecords");
    ok.maxPollRecords(10);
    assertThatThrownBy(() -> ok.pollTimeout(Duration.ZERO).build()).hasMessageContaining("pollTimeout");
    ok.pollTimeout(Duration.ofMillis(10));
    assertThatThrownBy(() -> ok.closeTimeout(Duration.ofHours(1)).build()).hasMessageContaining("closeTimeout");
    ok.closeTimeout(Duration.ofSeconds(1));
    // the attempts table's consumer_group holds 255 characters (VARCHAR(255) on MariaDB)
    ok.groupId("g".repeat(255));
    assertThatThrownBy(() -> ok.groupId("g".repeat(256))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("groupId").hasMessageContaining("255").hasMessageContaining("256");
    assertThat(ok.build()).isNotNull(); // the refused group id changed nothing
    assertThatThrownBy(() -> ok.retryBackoff(null).build()).hasMessageContaining("retryBackoff");
  }

  /** Whether the group's committed offsets reach the end of every partition of {@code topic}. */
  static boolean committedToEnd(String group, String topic) {
    return Offsets.committedToEnd(kafka, group, topic);
  }
}
