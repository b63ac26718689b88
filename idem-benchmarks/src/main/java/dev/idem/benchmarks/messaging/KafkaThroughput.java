package dev.idem.benchmarks.messaging;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.kafka.KafkaInbox;
import dev.idem.kafka.KafkaPublisher;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestKafka;
import dev.idem.testing.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntSupplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Outbox to Kafka and Kafka to the inbox, on an in-process broker (one KRaft node, {@link
 * TestKafka}) and the benchmark database, in one JVM on one machine. Messages: a 200-byte payload,
 * an aggregate key of 64, a header; topics of 4 partitions. Rows, in messages per second:
 *
 * <ul>
 *   <li>{@code publishAll alone}: {@link KafkaPublisher#publishAll} of batches made in memory, no
 *       database: the Kafka side's ceiling.
 *   <li>{@code enqueue alone}: one thread enqueueing 100 messages a transaction, no relay: the
 *       producer side's.
 *   <li>{@code relay drains a backlog}: {@code N} messages already pending, sent by 1 or 2 relays
 *       ({@link KafkaPublisher}, each batch sent asynchronously and waited for once) until every one
 *       is acknowledged by Kafka and marked sent.
 *   <li>{@code end to end}: the clock starts before the first enqueue; {@code producers} threads
 *       enqueue {@code N} messages (100 a transaction) while 1 or 2 relays send them; it stops when
 *       the last is acknowledged and marked sent.
 *   <li>{@code one at a time}: the same with a publisher that sends each message and waits for its
 *       acknowledgement before the next (the default {@code publishAll}); {@code N/10} messages.
 *   <li>{@code inbox}: the {@code 4N} records the relays wrote, consumed by one {@link KafkaInbox}
 *       as a new group (polls of 500, {@code receiveAll}, one effect row per message, offsets
 *       committed after the database); the clock, started before the consumer joins its group,
 *       stops when the last effect is committed.
 * </ul>
 *
 * The rows alternate, round after round, so a noisy machine slows them alike; the table gives the
 * median of the rounds after a warm-up round. Run: {@code java -cp
 * idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.messaging.KafkaThroughput [rounds] [N]}
 * (default 3 rounds, N = 20,000; {@code -Dbatch=} relay batch size, default 500; {@code
 * -Dproducers=} default 2).
 */
public final class KafkaThroughput {
  private static final byte[] PAYLOAD = new byte[200];
  /** Producer threads enqueueing meanwhile in the end-to-end runs, as a service's request threads do. */
  private static final int PRODUCERS = Integer.getInteger("producers", 2);
  /** Messages a relay claims and publishes per batch. */
  private static final int BATCH = Integer.getInteger("batch", 500);

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
    int n = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
    try (TestKafka kafka = TestKafka.start(); TestDatabase db = TestPostgres.newDatabase("bench_kafka")) {
      HikariDataSource ds = db.warmDataSource(8);
      IdemFlyway.migrate(ds);
      db.execute("CREATE TABLE effects (message_id text NOT NULL, payload_bytes int NOT NULL)");
      Idem idem = Idem.builder(ds).build();
      KafkaThroughput bench = new KafkaThroughput(kafka, db, idem);
      Map<String, List<Double>> rates = new LinkedHashMap<>();
      for (int r = 0; r <= rounds; r++) { // round 0 warms up
        String topic = "bench-" + r;
        kafka.createTopic(topic, 4);
        record(rates, r, "publishAll alone, batches of " + BATCH + ", no database", bench.publishAlone(topic + "-alone", n));
        record(rates, r, "enqueue alone (1 thread, 100 a transaction), no relay", bench.enqueueAlone(topic, n));
        record(rates, r, "relay drains a backlog: 1 relay, batches of " + BATCH, bench.relay(topic, n, 1, true, false));
        record(rates, r, "relay drains a backlog: 2 relays, batches of " + BATCH, bench.relay(topic, n, 2, true, false));
        record(rates, r, "end to end, " + PRODUCERS + " producers and 1 relay at once", bench.relay(topic, n, 1, true, true));
        record(rates, r, "end to end, " + PRODUCERS + " producers and 2 relays at once", bench.relay(topic, n, 2, true, true));
        record(rates, r, "end to end, 1 relay sending one at a time (N/10)", bench.relay(topic + "-sync", n / 10, 1, false, true));
        record(rates, r, "inbox: KafkaInbox, polls of 500, one effect row each", bench.inbox(topic, 4 * n, "group-" + r));
      }
      System.out.printf("%n| path | messages | msg/s, median of %d rounds | rounds |%n|---|---:|---:|---|%n", rounds);
      for (Map.Entry<String, List<Double>> e : rates.entrySet()) {
        System.out.printf("| %s | %,d | %,.0f | %s |%n", e.getKey(), e.getKey().contains("N/10") ? n / 10 : e.getKey().startsWith("inbox") ? 4 * n : n,
            Rounds.median(e.getValue()), Rounds.each(e.getValue()));
      }
      ds.close();
    }
  }

  private static void record(Map<String, List<Double>> rates, int round, String what, double rate) {
    System.out.printf("round %d: %s: %,.0f msg/s%n", round, what, rate);
    if (round > 0) {
      rates.computeIfAbsent(what, k -> new ArrayList<>()).add(rate);
    }
  }

  private final TestKafka kafka;
  private final TestDatabase db;
  private final Idem idem;

  private KafkaThroughput(TestKafka kafka, TestDatabase db, Idem idem) {
    this.kafka = kafka;
    this.db = db;
    this.idem = idem;
  }

  /** Enqueues {@code n} messages, 100 a transaction, as one producer thread. */
  private void enqueue(String topic, int n) {
    for (int done = 0; done < n; done += 100) {
      idem.useTransaction(tx -> {
        List<NewMessage> batch = new ArrayList<>(100);
        for (int i = 0; i < 100; i++) {
          batch.add(NewMessage.of(topic, PAYLOAD).withAggregateKey("k" + (i % 64)).withHeader("type", "Bench"));
        }
        idem.outbox().enqueueAll(tx.connection(), batch);
      });
    }
  }

  /** KafkaPublisher.publishAll alone, batches made in memory, no database; messages per second. */
  double publishAlone(String topic, int n) throws Exception {
    List<OutboxMessage> batch = new ArrayList<>(BATCH);
    for (int i = 0; i < BATCH; i++) {
      batch.add(new Message(java.util.UUID.randomUUID(), topic, "k" + (i % 64), PAYLOAD, Map.of("type", "Bench"), java.time.Instant.now(), 1));
    }
    try (KafkaPublisher kafkaPublisher = publisher(true)) {
      long start = System.nanoTime();
      for (int done = 0; done < n; done += BATCH) {
        List<Throwable> outcomes = kafkaPublisher.publishAll(batch);
        check(outcomes.stream().allMatch(o -> o == null), "a send failed: " + outcomes);
      }
      return n * 1e9 / (System.nanoTime() - start);
    }
  }

  private KafkaPublisher publisher(boolean batched) {
    // One send at a time gathers nothing: no linger, or each send would wait it out.
    KafkaPublisher.Builder b = KafkaPublisher.builder(kafka.bootstrapServers()).linger(batched ? Duration.ofMillis(5) : Duration.ZERO);
    return b.build();
  }

  /** Enqueue alone, no relay: what bounds the end-to-end rate from the producer's side; messages per second. */
  double enqueueAlone(String topic, int n) {
    db.execute("TRUNCATE idem.idem_outbox");
    long start = System.nanoTime();
    enqueue(topic, n);
    return n * 1e9 / (System.nanoTime() - start);
  }

  /**
   * {@code relays} relay loops send {@code n} messages to {@code topic}, enqueued meanwhile by one
   * producer thread ({@code endToEnd}) or before the clock starts; messages per second.
   */
  double relay(String topic, int n, int relays, boolean batched, boolean endToEnd) throws Exception {
    db.execute("TRUNCATE idem.idem_outbox");
    if (!endToEnd) {
      enqueue(topic, n);
      db.execute("VACUUM ANALYZE idem.idem_outbox");
    }
    try (KafkaPublisher kafkaPublisher = publisher(batched)) {
      Publisher publisher = batched ? kafkaPublisher : oneAtATime(kafkaPublisher);
      AtomicInteger sent = new AtomicInteger();
      List<Thread> threads = new ArrayList<>();
      long start = System.nanoTime();
      if (endToEnd) {
        for (int p = 0; p < PRODUCERS; p++) {
          threads.add(new Thread(() -> enqueue(topic, n / PRODUCERS)));
        }
      }
      for (int i = 0; i < relays; i++) {
        Relay relay = idem.relay(publisher).batchSize(BATCH).build();
        threads.add(new Thread(() -> drain(relay::runOnce, sent, n)));
      }
      threads.forEach(Thread::start);
      for (Thread t : threads) {
        t.join();
      }
      long took = System.nanoTime() - start;
      check(sent.get() == n && db.count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'S'") == n,
          "sent " + sent.get() + " of " + n);
      return n * 1e9 / took;
    }
  }

  /** As the relay loop runs: batches back to back, a short wait when one sent nothing. */
  private static void drain(IntSupplier batch, AtomicInteger sent, int n) {
    while (sent.get() < n) {
      int s = batch.getAsInt();
      sent.addAndGet(s);
      if (s == 0) {
        try {
          Thread.sleep(2);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
  }

  /** {@code kafka} without its batch send: the default publishAll, each message sent and waited for. */
  private static Publisher oneAtATime(KafkaPublisher kafka) {
    return new Publisher() {
      @Override
      public void publish(OutboxMessage message) throws Exception {
        kafka.publish(message);
      }
    };
  }

  /** Consumes the {@code n} records of {@code topic} as a new group through the inbox; messages per second. */
  double inbox(String topic, int n, String group) throws Exception {
    db.execute("TRUNCATE effects");
    AtomicInteger applied = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = (tx, r) -> {
      try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effects VALUES (?, ?)")) {
        ps.setString(1, new String(r.headers().lastHeader(KafkaPublisher.DEFAULT_ID_HEADER).value(), StandardCharsets.UTF_8));
        ps.setInt(2, r.value().length);
        ps.executeUpdate();
      }
      applied.incrementAndGet();
    };
    long start = System.nanoTime();
    try (KafkaInbox consumer = KafkaInbox.builder(idem.inbox(group).build(), effect).bootstrapServers(kafka.bootstrapServers())
        .groupId(group).topics(topic).deadLetterTopic(topic + ".dead").pollTimeout(Duration.ofMillis(50)).build()) {
      consumer.start();
      while (applied.get() < n) { // counted in the effects, before their commit: no query load while it runs
        Thread.sleep(2);
      }
      while (db.count("SELECT count(*) FROM effects") < n) { // then the last batch's commit
        Thread.sleep(2);
      }
    }
    long took = System.nanoTime() - start;
    check(db.count("SELECT count(*) FROM effects") == n, "applied " + applied.get() + " of " + n);
    return n * 1e9 / took;
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException(what);
    }
  }

  /** A message handed to the publisher directly, as the relay would hand it (OutboxMessage is built by idem's relay). */
  private record Message(java.util.UUID id, String topic, String aggregateKey, byte[] payload,
      java.util.Map<String, String> headers, java.time.Instant createdAt, int attempt) implements OutboxMessage {}
}
