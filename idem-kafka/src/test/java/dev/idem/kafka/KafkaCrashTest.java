package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestKafka;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Real processes killed at the worst moment, and the broker restarted mid-run: every committed
 * outbox message's effect exactly once in the database, counted per id ({@code shipments} has no
 * unique index: a second effect shows). On PostgreSQL or MariaDB, the run's ({@link TestDatabase}):
 * the children connect to the test's database by its URL.
 */
@IdemTest(poolSize = 8, sql = "CREATE TABLE shipments (message_id text NOT NULL)")
class KafkaCrashTest {
  final TestKafka kafka = Broker.shared();
  final TestDatabase db;
  final Idem idem;

  /** One row per application, in the inbox's transaction. */
  static final BatchEffect<ConsumerRecord<byte[], byte[]>> EFFECT = (tx, r) -> {
    try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO shipments VALUES (?)")) {
      ps.setString(1, new String(r.headers().lastHeader("id").value(), StandardCharsets.UTF_8));
      ps.executeUpdate();
    }
  };

  KafkaCrashTest(TestDatabase db, Idem idem) {
    this.db = db;
    this.idem = idem;
  }

  @BeforeEach
  void clean() {
    db.execute("TRUNCATE shipments; TRUNCATE idem_outbox");
  }

  List<UUID> enqueue(String topic, int n) {
    List<NewMessage> messages = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      messages.add(NewMessage.of(topic, ("ship " + i).getBytes(StandardCharsets.UTF_8)).withAggregateKey("order-" + i));
    }
    return idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), messages));
  }

  static Process child(String... args) throws Exception {
    return command(args).start();
  }

  static ProcessBuilder command(String... args) {
    String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
    List<String> command = new ArrayList<>(List.of(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
        "-cp", System.getProperty("java.class.path"), CrashChild.class.getName()));
    command.addAll(List.of(args));
    return new ProcessBuilder(command).redirectErrorStream(true);
  }

  /** Reads the child's output until a line starting with {@code prefix}; that line. */
  static String awaitLine(Process child, String prefix) throws Exception {
    BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
    StringBuilder seen = new StringBuilder();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    String line;
    while ((line = out.readLine()) != null) {
      if (line.startsWith(prefix)) {
        return line;
      }
      seen.append(line).append('\n');
      assertThat(System.nanoTime()).as("child output so far:\n%s", seen).isLessThan(deadline);
    }
    throw new AssertionError("the child ended without printing " + prefix + ":\n" + seen);
  }

  static void kill(Process child) throws InterruptedException {
    child.destroyForcibly();
    assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
  }

  long shipments() {
    return db.count("SELECT count(*) FROM shipments");
  }

  long idsShippedMoreThanOnce() {
    return db.count("SELECT count(*) FROM (SELECT message_id FROM shipments GROUP BY message_id HAVING count(*) > 1) t");
  }

  static List<UUID> twice(List<UUID> ids) {
    List<UUID> both = new ArrayList<>(ids);
    both.addAll(ids);
    return both;
  }

  @Test
  void aRelayKilledBetweenPublishAndMarkRepublishesTheSameIdsAndTheInboxAppliesEachOnce() throws Exception {
    kafka.createTopic("crash-relay", 2);
    List<UUID> ids = enqueue("crash-relay", 20);
    Process relayChild = child("relay", db.jdbcUrl(), kafka.bootstrapServers());
    assertThat(awaitLine(relayChild, "PUBLISHED")).isEqualTo("PUBLISHED 20");
    kill(relayChild);
    // Kafka has every message; the outbox was never told.
    assertThat(kafka.records("crash-relay")).hasSize(20);
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'P'")).isEqualTo(20);

    try (KafkaPublisher kafkaPublisher = KafkaPublisher.builder(kafka.bootstrapServers()).build()) {
      assertThat(idem.relay(kafkaPublisher).batchSize(100).build().runOnce()).isEqualTo(20);
    }
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(20);
    assertThat(kafka.records("crash-relay")).hasSize(40);
    // each republished with the same id
    assertThat(kafka.records("crash-relay")).extracting(r -> UUID.fromString(KafkaPublisherTest.header(r, "id")))
        .containsExactlyInAnyOrderElementsOf(twice(ids));

    try (KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), EFFECT).bootstrapServers(kafka.bootstrapServers())
        .groupId("crash-relay").topics("crash-relay").deadLetterTopic("crash-relay.dead").pollTimeout(Duration.ofMillis(100)).build()) {
      consumer.start();
      Poll.until("all 40 records consumed", () -> Offsets.committedToEnd(kafka, "crash-relay", "crash-relay"));
    }
    assertThat(shipments()).isEqualTo(20);
    assertThat(idsShippedMoreThanOnce()).isZero();
  }

  @Test
  void aConsumerKilledAfterItsDatabaseCommitAndBeforeItsOffsetCommitIsRedeliveredAndAppliesOnce() throws Exception {
    kafka.createTopic("crash-consumer", 1);
    enqueue("crash-consumer", 30);
    try (KafkaPublisher kafkaPublisher = KafkaPublisher.builder(kafka.bootstrapServers()).build()) {
      assertThat(idem.relay(kafkaPublisher).batchSize(100).build().runOnce()).isEqualTo(30);
    }
    Process consumerChild = child("consumer", db.jdbcUrl(), kafka.bootstrapServers(), "crash-consumer", "crash-consumer");
    awaitLine(consumerChild, "COMMITTED");
    kill(consumerChild);
    long applied = shipments();
    assertThat(applied).isPositive(); // the killed consumer's effects are in the database...
    assertThat(Offsets.committedToEnd(kafka, "crash-consumer", "crash-consumer")).isFalse(); // ...its offsets are not

    try (KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), EFFECT).bootstrapServers(kafka.bootstrapServers())
        .groupId("crash-consumer").topics("crash-consumer").deadLetterTopic("crash-consumer.dead")
        .pollTimeout(Duration.ofMillis(100)).build()) {
      consumer.start();
      Poll.until("the redelivered records consumed", () -> Offsets.committedToEnd(kafka, "crash-consumer", "crash-consumer"));
    }
    assertThat(shipments()).isEqualTo(30);
    assertThat(idsShippedMoreThanOnce()).isZero();
  }

  /**
   * A record whose effect halts the JVM: each consumer process that meets it dies, and its delivery
   * and (run alone) its attempt, counted in the database before the effect ran, stay. After
   * maxAttempts (2) deaths alone the next process sends it to the dead-letter topic without running it; a consumer started after that,
   * and one whose group's offsets went back before it, acknowledge it without running it or
   * dead-lettering it again.
   */
  @Test
  void aPoisonRecordThatKillsItsConsumerIsDeadLetteredAfterMaxAttemptsAcrossRestartsAndStaysSo() throws Exception {
    kafka.createTopic("crash-poison", 1);
    enqueue("crash-poison", 3);
    UUID poison = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(),
        NewMessage.of("crash-poison", "poison".getBytes(StandardCharsets.UTF_8))));
    enqueue("crash-poison", 2);
    try (KafkaPublisher kafkaPublisher = KafkaPublisher.builder(kafka.bootstrapServers()).build()) {
      assertThat(idem.relay(kafkaPublisher).batchSize(100).build().runOnce()).isEqualTo(6);
    }
    // 0 without a row: a batch's records have none
    String attempts = "SELECT coalesce(max(attempts), 0) FROM idem_inbox_attempts WHERE consumer_group = 'crash-poison' AND message_id = ?";
    String range = "SELECT count(*) FROM idem_inbox_polls WHERE consumer_group = 'crash-poison' AND topic = 'crash-poison'"
        + " AND record_partition = 0";
    // The first death is in a batch of six, where it is blamed on none; then the records run alone,
    // and the poison's two attempts alone kill two more.
    for (int death = 1; death <= 3; death++) {
      Process child = child("poison", db.jdbcUrl(), kafka.bootstrapServers(), "crash-poison", "crash-poison");
      awaitLine(child, "POISON");
      assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
      assertThat(child.exitValue()).isEqualTo(1);
      assertThat(db.count(attempts, poison.toString())).as("attempts after death %d", death).isEqualTo(death - 1);
      if (death == 1) {
        // the batch's poll wrote its partition's range, delivered once, and no row per record
        assertThat(db.count(range + " AND first_offset = 0 AND last_offset >= 3 AND deliveries = 1")).isEqualTo(1);
        assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'crash-poison'")).isZero();
        assertThat(shipments()).isZero();
      } else if (death == 2) {
        // the range delivered again after the kill: one record a poll, each alone (four polls after
        // the first) up to the poison, the only record with an attempt; the partition's records
        // counted one by one, the rows of those settled deleted
        assertThat(db.count(range + " AND first_offset = 3 AND deliveries = 5")).isEqualTo(1);
        assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'crash-poison' AND attempts > 0")).isEqualTo(1);
        assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'crash-poison' AND record_offset < 3")).isZero();
        assertThat(shipments()).isEqualTo(3);
      }
    }
    assertThat(kafka.records("crash-poison.dead")).isEmpty();

    File said = File.createTempFile("crash-poison", ".log");
    said.deleteOnExit();
    Process last = command("poison", db.jdbcUrl(), kafka.bootstrapServers(), "crash-poison", "crash-poison")
        .redirectOutput(said).start();
    try {
      // a JVM to start and a group to join on a loaded machine: a longer bound than Poll's
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (!Offsets.committedToEnd(kafka, "crash-poison", "crash-poison")) {
        assertThat(last.isAlive()).as("the fourth consumer process runs").isTrue();
        assertThat(System.nanoTime()).as("the group past every record within 90 s").isLessThan(deadline);
        Thread.sleep(200);
      }
    } finally {
      kill(last);
      System.out.println("the fourth consumer process said:\n" + java.nio.file.Files.readString(said.toPath()));
    }
    assertThat(last.exitValue()).as("the fourth process did not run the poison's effect").isNotEqualTo(1);
    List<ConsumerRecord<byte[], byte[]>> dead = kafka.records("crash-poison.dead");
    assertThat(dead).hasSize(1);
    assertThat(KafkaPublisherTest.header(dead.get(0), "id")).isEqualTo(poison.toString());
    assertThat(KafkaPublisherTest.header(dead.get(0), DeadLetters.ERROR_HEADER)).contains("started 2 times alone without an outcome");
    assertThat(db.count(attempts, poison.toString())).isEqualTo(3);
    assertThat(db.count("SELECT count(*) FROM idem_inbox_attempts WHERE consumer_group = 'crash-poison' AND state = 'D'")).isEqualTo(1);
    // the poison's offset kept: a poll from before it reads the records' states
    assertThat(db.count(range + " AND given_up_offset = 3")).isEqualTo(1);
    assertThat(shipments()).isEqualTo(5);
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id = ?", poison.toString())).isZero();

    // The group's offsets back to the start (an offset commit lost, a reset): the dead letter is
    // recognised, neither run nor dead-lettered again, and the others are duplicates.
    Offsets.rewind(kafka, "crash-poison", "crash-poison");
    AtomicBoolean ranPoison = new AtomicBoolean();
    try (KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), (tx, r) -> {
          if (new String(r.value(), StandardCharsets.UTF_8).equals("poison")) {
            ranPoison.set(true);
            throw new IllegalStateException("poison");
          }
          EFFECT.apply(tx, r);
        }).bootstrapServers(kafka.bootstrapServers()).groupId("crash-poison").topics("crash-poison")
        .deadLetterTopic("crash-poison.dead").maxAttempts(2).pollTimeout(Duration.ofMillis(100)).build()) {
      consumer.start();
      Poll.until("the group past every record again", () -> Offsets.committedToEnd(kafka, "crash-poison", "crash-poison"));
    }
    assertThat(ranPoison).isFalse();
    assertThat(kafka.records("crash-poison.dead")).hasSize(1);
    assertThat(db.count(attempts, poison.toString())).isEqualTo(3);
    assertThat(shipments()).isEqualTo(5);
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id = ?", poison.toString())).isZero();
  }

  @Test
  void aBrokerRestartedMidRunLosesNothingAndAppliesEachCommittedMessageOnce() throws Exception {
    kafka.createTopic("crash-broker", 3);
    int n = 3000;
    AtomicBoolean restarted = new AtomicBoolean();
    try (KafkaPublisher kafkaPublisher = KafkaPublisher.builder(kafka.bootstrapServers()).deliveryTimeout(Duration.ofSeconds(5)).build();
         Relay relay = idem.relay(kafkaPublisher).batchSize(200).pollInterval(Duration.ofMillis(20))
             .backoff(Duration.ofMillis(50), Duration.ofMillis(200)).maxAttempts(1000).build();
         KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), EFFECT).bootstrapServers(kafka.bootstrapServers())
             .groupId("crash-broker").topics("crash-broker").deadLetterTopic("crash-broker.dead")
             .pollTimeout(Duration.ofMillis(100)).retryBackoff(Duration.ofMillis(100)).build()) {
      relay.start();
      consumer.start();
      Thread producer = new Thread(() -> {
        for (int i = 0; i < 30; i++) {
          enqueue("crash-broker", n / 30);
          if (i == 10) {
            try {
              Poll.until("the first shipments", () -> shipments() > 0);
            } catch (InterruptedException e) {
              return;
            }
            kafka.restart(); // the broker goes away and comes back while messages flow both ways
            restarted.set(shipments() < n);
          }
        }
      });
      producer.start();
      producer.join(TimeUnit.SECONDS.toMillis(120));
      assertThat(restarted).isTrue();
      Poll.until(n + " shipments", () -> shipments() >= n);
      Poll.until("every message sent", () -> db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S'") == n);
    }
    assertThat(shipments()).isEqualTo(n);
    assertThat(idsShippedMoreThanOnce()).isZero();
    // the outbox's id is a uuid on PostgreSQL, CHAR(36) in ascii on MariaDB: the shipment's text
    // cast to it finds each message by primary key (compared as text, MariaDB joined 3,000 x 3,000 rows)
    String on = db.vendor() == TestDatabase.Vendor.POSTGRESQL ? "o.id::text = s.message_id"
        : "o.id = CAST(s.message_id AS CHAR(36) CHARACTER SET ascii)";
    assertThat(db.count("SELECT count(*) FROM shipments s JOIN idem_outbox o ON " + on)).isEqualTo(n);
  }
}
