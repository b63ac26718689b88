package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

// published: no unique index, so that duplicates show
@IdemTest(poolSize = 12, sql = "CREATE TABLE published (id uuid NOT NULL, relay int NOT NULL)")
class RelayTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static Outbox outbox;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
    outbox = idem.outbox();
  }

  @BeforeEach
  void clean() throws SQLException {
    sql("TRUNCATE published; TRUNCATE idem_outbox");
  }

  static void sql(String s) {
    db.execute(s);
  }

  static long count(String query) {
    return db.count(query);
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /**
   * How many rows of published are copies of a message marked sent. On MariaDB published.id is a
   * native UUID and idem_outbox.id a CHAR(36): compared as they are, MariaDB can use neither index
   * and joins by a block nested loop converting every pair (10,000 x 10,000, about 40 s of the drain
   * test); the copy's id cast to the key's type finds its message by primary key.
   */
  static long sentAndPublished() {
    return count("SELECT count(*) FROM published p JOIN idem_outbox o ON o.id = "
        + (mariadb() ? "CAST(p.id AS CHAR(36) CHARACTER SET ascii)" : "p.id") + " WHERE o.status = 'S'");
  }

  /**
   * The database clock moved by {@code d} (negative: back), in SQL: PostgreSQL's clock_timestamp(),
   * MariaDB's UTC_TIMESTAMP(6) (its idem times are UTC DATETIMEs).
   */
  static String clockPlus(Duration d) {
    long micros = d.toNanos() / 1_000;
    return mariadb() ? "(utc_timestamp(6) + interval " + micros + " microsecond)"
        : "(clock_timestamp() + interval '" + micros + " microseconds')";
  }

  /** {@code instant} (the database clock's text, read earlier) plus {@code d}, as SQL. */
  static String instantPlus(String instant, Duration d) {
    long micros = d.toNanos() / 1_000;
    return mariadb() ? "(CAST('" + instant + "' AS DATETIME(6)) + interval " + micros + " microsecond)"
        : "('" + instant + "'::timestamptz + interval '" + micros + " microseconds')";
  }

  /** {@code IN} with the ids as string literals: a uuid column (PostgreSQL, MariaDB) and MariaDB's CHAR(36) id take both. */
  static String in(List<UUID> ids) {
    return ids.stream().map(id -> "'" + id + "'").collect(java.util.stream.Collectors.joining(", ", "IN (", ")"));
  }

  static String status(UUID id) {
    return idem.<String, RuntimeException>inTransaction(tx -> (String) tx.dsl().fetchValue("SELECT status FROM idem_outbox WHERE id = '" + id + "'"));
  }

  static UUID enqueue(NewMessage m) {
    return idem.inTransaction(tx -> outbox.enqueue(tx.connection(), m));
  }

  /** A relay whose publisher records each message it sends, with {@code relayNo}, through {@code insertPublished}. */
  static Relay recordingRelay(PreparedStatement insertPublished, int relayNo, int batchSize) {
    return idem.relay(m -> {
      insertPublished.setObject(1, m.id());
      insertPublished.setInt(2, relayNo);
      insertPublished.executeUpdate();
    }).batchSize(batchSize).build();
  }

  static NewMessage msg(String text) {
    return NewMessage.of("orders", text.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void enqueueWritesInTheCallersTransactionWithATimeOrderedIdMintedThere() throws SQLException {
    UUID kept;
    UUID dropped;
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      dropped = outbox.enqueue(c, msg("dropped"));
      c.rollback();
      kept = outbox.enqueue(c, msg("kept").withAggregateKey("order-1").withHeader("type", "Shipped").withHeader("trace", "t-1"));
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + dropped + "'")).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + kept + "' AND status = 'P' AND attempts = 0"
        + (mariadb() ? " AND header_names = '[\"type\",\"trace\"]' AND header_values = '[\"Shipped\",\"t-1\"]'"
            : " AND header_names = '{type,trace}' AND header_values = '{Shipped,t-1}'")
        + " AND aggregate_key = 'order-1'")).isEqualTo(1);
    assertThat(kept.version()).isEqualTo(7);
    assertThat(kept.variant()).isEqualTo(2);
    long ms = kept.getMostSignificantBits() >>> 16;
    assertThat(Math.abs(ms - System.currentTimeMillis())).isLessThan(60_000);
    List<UUID> ids = new ArrayList<>();
    for (int i = 0; i < 10_000; i++) {
      ids.add(UuidV7.next());
    }
    List<UUID> sorted = new ArrayList<>(ids);
    Collections.sort(sorted, (a, b) -> Long.compareUnsigned(a.getMostSignificantBits(), b.getMostSignificantBits()) != 0
        ? Long.compareUnsigned(a.getMostSignificantBits(), b.getMostSignificantBits())
        : Long.compareUnsigned(a.getLeastSignificantBits(), b.getLeastSignificantBits()));
    assertThat(sorted).isEqualTo(ids).doesNotHaveDuplicates();

    assertThatThrownBy(() -> NewMessage.of(" ", new byte[0])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
    assertThatThrownBy(() -> NewMessage.of("t", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("payload");
    assertThatThrownBy(() -> msg("x").withHeader("h", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("header");
    assertThatThrownBy(() -> idem.relay(m -> {}).batchSize(0).build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batchSize");
  }

  @Test
  void theRelayHandsEachMessageWithItsIdToThePublisherAndMarksItSent() {
    UUID id = enqueue(msg("hello").withAggregateKey("order-2").withHeader("type", "Created"));
    List<OutboxMessage> seen = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(seen::add).build();
    assertThat(relay.runOnce()).isEqualTo(1);
    assertThat(relay.runOnce()).isZero();
    assertThat(seen).hasSize(1);
    OutboxMessage m = seen.get(0);
    assertThat(m.id()).isEqualTo(id);
    assertThat(new String(m.payload(), StandardCharsets.UTF_8)).isEqualTo("hello");
    assertThat(m.topic()).isEqualTo("orders");
    assertThat(m.aggregateKey()).isEqualTo("order-2");
    assertThat(m.headers()).isEqualTo(Map.of("type", "Created"));
    assertThat(m.attempt()).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + id + "' AND status = 'S' AND sent_at IS NOT NULL")).isEqualTo(1);
  }

  @Test
  void fourRelaysDrainTenThousandMessagesEachPublishedOnce() throws Exception {
    long enqueueStarted = System.nanoTime();
    idem.useTransaction(tx -> {
      for (int i = 0; i < 10_000; i++) {
        outbox.enqueue(tx.connection(), msg("m" + i));
      }
    });
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'P'")).isEqualTo(10_000);
    int relays = 4;
    ExecutorService pool = Executors.newFixedThreadPool(relays);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<Integer>> done = new ArrayList<>();
    for (int r = 0; r < relays; r++) {
      int relayNo = r;
      done.add(pool.submit(() -> {
        // each relay's publisher writes what it sent on its own connection, as a broker would keep it
        try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
          // a broker acknowledging each batch at once: one commit per batch, not one per message
          // (10,000 commits took about 50 s of this test on MariaDB, which syncs each to disk)
          pc.setAutoCommit(false);
          Relay relay = idem.relay(new Publisher() {
            @Override
            public void publish(OutboxMessage m) throws Exception {
              publishAll(List.of(m));
            }

            @Override
            public List<Throwable> publishAll(List<OutboxMessage> batch) throws Exception {
              for (OutboxMessage m : batch) {
                ps.setObject(1, m.id());
                ps.setInt(2, relayNo);
                ps.addBatch();
              }
              ps.executeBatch();
              pc.commit();
              return java.util.Collections.nCopies(batch.size(), null);
            }
          }).batchSize(100).build();
          go.await();
          int total = 0;
          for (int n; (n = relay.runOnce()) > 0; ) {
            total += n;
          }
          return total;
        }
      }));
    }
    long drainStarted = System.nanoTime();
    go.countDown();
    int total = 0;
    List<Integer> perRelay = new ArrayList<>();
    for (Future<Integer> f : done) {
      int n = f.get(120, TimeUnit.SECONDS);
      perRelay.add(n);
      total += n;
    }
    long drainMillis = Math.max(1, (System.nanoTime() - drainStarted) / 1_000_000);
    // a figure for the reader, never asserted (a loaded machine is slower)
    System.out.printf("relay drain on %s: 10000 messages enqueued in %d ms, drained by %d relays %s in %d ms (%d messages/s)%n",
        db.vendor(), (drainStarted - enqueueStarted) / 1_000_000, relays, perRelay, drainMillis, total * 1000L / drainMillis);
    pool.shutdown();
    assertThat(total).isEqualTo(10_000);
    assertThat(count("SELECT count(*) FROM published")).isEqualTo(10_000);
    assertThat(count("SELECT count(DISTINCT id) FROM published")).isEqualTo(10_000);
    assertThat(sentAndPublished()).isEqualTo(10_000);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status <> 'S'")).isZero();
    assertThat(count("SELECT count(DISTINCT relay) FROM published")).isGreaterThan(1); // they shared the work
  }

  @Test
  void batchesFromFourProducersWhileTwoRelaysDrainArePublishedOnceEach() throws Exception {
    int producers = 4;
    int txPerProducer = 40;
    List<UUID> enqueued = Collections.synchronizedList(new ArrayList<>());
    AtomicBoolean producing = new AtomicBoolean(true);
    ExecutorService pool = Executors.newFixedThreadPool(producers + 2);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<?>> producing4 = new ArrayList<>();
    for (int p = 0; p < producers; p++) {
      int producer = p;
      producing4.add(pool.submit(() -> {
        go.await();
        for (int t = 0; t < txPerProducer; t++) {
          int size = 1 + (producer * txPerProducer + t) % 45; // 1 to 45 messages: one statement and two
          List<NewMessage> batch = new ArrayList<>();
          for (int i = 0; i < size; i++) {
            batch.add(msg(producer + "/" + t + "/" + i));
          }
          enqueued.addAll(idem.inTransaction(tx -> outbox.enqueueAll(tx.connection(), batch)));
        }
        return null;
      }));
    }
    List<Future<?>> relays = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      int relayNo = r;
      relays.add(pool.submit(() -> {
        try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
          pc.setAutoCommit(true);
          Relay relay = recordingRelay(ps, relayNo, 50);
          go.await();
          // keep draining while producers run, then until nothing is left
          while (producing.get() | relay.runOnce() > 0) {
            Thread.sleep(1);
          }
        }
        return null;
      }));
    }
    go.countDown();
    for (Future<?> f : producing4) {
      f.get(120, TimeUnit.SECONDS);
    }
    producing.set(false);
    for (Future<?> f : relays) {
      f.get(120, TimeUnit.SECONDS);
    }
    pool.shutdown();
    long expected = 0;
    for (int i = 0; i < producers * txPerProducer; i++) {
      expected += 1 + i % 45;
    }
    assertThat(enqueued).hasSize((int) expected).doesNotHaveDuplicates();
    assertThat(count("SELECT count(*) FROM idem_outbox")).isEqualTo(expected);
    assertThat(count("SELECT count(*) FROM published")).isEqualTo(expected);
    assertThat(count("SELECT count(DISTINCT id) FROM published")).isEqualTo(expected);
    assertThat(sentAndPublished()).isEqualTo(expected);
    assertThat(count("SELECT count(*) FROM published WHERE id " + in(enqueued))).isEqualTo(expected);
  }

  @Test
  void theOrderedRelayPublishesABatchOfOneKeyInListOrder() throws Exception {
    List<NewMessage> batch = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      batch.add(msg((i % 2 == 0 ? "a" : "b") + i).withAggregateKey(i % 2 == 0 ? "A" : "B"));
    }
    idem.useTransaction(tx -> outbox.enqueueAll(tx.connection(), batch));
    List<String> order = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> order.add(new String(m.payload(), StandardCharsets.UTF_8))).orderedByAggregateKey(true).build();
    while (relay.runOnce() > 0) {
      // one message per key per batch
    }
    List<String> expected = batch.stream().map(m -> new String(m.payload(), StandardCharsets.UTF_8)).toList();
    assertThat(order).hasSize(40);
    assertThat(order.stream().filter(s -> s.startsWith("a")).toList()).isEqualTo(expected.stream().filter(s -> s.startsWith("a")).toList());
    assertThat(order.stream().filter(s -> s.startsWith("b")).toList()).isEqualTo(expected.stream().filter(s -> s.startsWith("b")).toList());
  }

  /**
   * Two instances whose clocks disagree: the second message of a key is enqueued after the first,
   * by an instance whose clock is a minute behind, so its time-ordered id is the lower of the two.
   * The ordered relay publishes in the order the database wrote them, not by id.
   */
  @Test
  void theOrderedRelayOrdersByTheDatabaseNotByTheClocksThatMintedTheIds() throws Exception {
    UUID first = enqueue(msg("first").withAggregateKey("K"));
    // the other instance's enqueue, its UUIDv7 a minute behind (its clock): the same row the
    // outbox writes, with an id whose 48-bit millisecond prefix is 60,000 lower
    long behind = (first.getMostSignificantBits() >>> 16) - 60_000;
    UUID skewed = new UUID((behind << 16) | (first.getMostSignificantBits() & 0xffff), first.getLeastSignificantBits());
    assertThat(skewed.toString()).isLessThan(first.toString());
    sql("INSERT INTO idem_outbox (id, topic, aggregate_key, payload) VALUES ('" + skewed + "', 'orders', 'K', "
        + (mariadb() ? "'second'" : "'second'::bytea") + ")");
    List<String> order = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> order.add(new String(m.payload(), StandardCharsets.UTF_8))).orderedByAggregateKey(true).build();
    while (relay.runOnce() > 0) {
      // one message of the key per batch
    }
    assertThat(order).containsExactly("first", "second");
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(2);
  }

  @Test
  void outboxStatsCountWhatTheTableHolds() throws Exception {
    assertThat(idem.operations().outboxStats().pending()).isZero();
    assertThat(idem.operations().outboxStats().parked()).isZero();
    List<UUID> ids = idem.inTransaction(tx -> outbox.enqueueAll(tx.connection(), List.of(msg("x"), msg("y"), msg("z"))));
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(3);
    Relay failing = idem.relay(m -> {
      throw new IOException("down");
    }).maxAttempts(1).build();
    failing.runOnce();
    assertThat(idem.operations().outboxStats().pending()).isZero();
    assertThat(idem.operations().outboxStats().parked()).isEqualTo(3).isEqualTo(count("SELECT count(*) FROM idem_outbox WHERE status = 'X'"));
    assertThat(idem.operations().redrive(ids.get(0))).isEqualTo(1);
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(1);
    assertThat(idem.operations().outboxStats().parked()).isEqualTo(2);
    // backing off after a failed publish is still pending
    Relay backingOff = idem.relay(m -> {
      throw new IOException("still down");
    }).backoff(Duration.ofMinutes(1), Duration.ofMinutes(2)).build();
    assertThat(backingOff.runOnce()).isZero();
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(1);
    // a snapshot: an open transaction's messages count only inside it
    CountDownLatch enqueuedNotCommitted = new CountDownLatch(1);
    CountDownLatch counted = new CountDownLatch(1);
    ExecutorService other = Executors.newSingleThreadExecutor();
    Future<Long> inside = other.submit(() -> idem.inTransaction(tx -> {
      outbox.enqueue(tx.connection(), msg("open"));
      long seen = idem.operations().outboxStats().pending();
      enqueuedNotCommitted.countDown();
      counted.await();
      return seen;
    }));
    assertThat(enqueuedNotCommitted.await(20, TimeUnit.SECONDS)).isTrue();
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(1);
    counted.countDown();
    assertThat(inside.get(20, TimeUnit.SECONDS)).isEqualTo(2);
    other.shutdown();
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(2).isEqualTo(count("SELECT count(*) FROM idem_outbox WHERE status = 'P'"));
    idem.relay(m -> {}).build().runOnce();
    assertThat(idem.operations().outboxStats().pending()).isEqualTo(1); // the one backing off
  }

  @Test
  void aFailingPublishBacksOffThenParksWithItsErrorAndARedriveSendsIt() throws Exception {
    UUID id = enqueue(msg("doomed"));
    AtomicBoolean brokerUp = new AtomicBoolean(false);
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> {
      attempts.add(m.attempt());
      if (!brokerUp.get()) {
        throw new IOException("broker down");
      }
    }).maxAttempts(3).backoff(Duration.ofSeconds(1), Duration.ofSeconds(2)).build();

    String before = idem.<String, RuntimeException>inTransaction(tx -> String.valueOf(tx.dsl().fetchValue(
        mariadb() ? "SELECT CAST(utc_timestamp(6) AS CHAR)" : "SELECT clock_timestamp()::text")));
    assertThat(relay.runOnce()).isZero();
    assertThat(attempts).containsExactly(1);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + id + "' AND status = 'P' AND attempts = 1"
        + " AND last_error LIKE '%broker down%'"
        // back-off with jitter: between half and all of 1 s after the failure, on the database
        // clock (measured from the clock read before the attempt, so a slow machine cannot fail it)
        + " AND next_attempt_at >= " + instantPlus(before, Duration.ofMillis(500))
        + " AND next_attempt_at <= " + clockPlus(Duration.ofSeconds(1)))).isEqualTo(1);
    // not due yet, while the database clock says so with room for the relay's own read
    if (count("SELECT count(*) FROM idem_outbox WHERE id = '" + id + "' AND next_attempt_at > " + clockPlus(Duration.ofMillis(200))) == 1) {
      assertThat(relay.runOnce()).isZero();
      assertThat(attempts).containsExactly(1);
    }

    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!"X".equals(status(id))) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      relay.runOnce();
      Thread.sleep(20);
    }
    assertThat(attempts).containsExactly(1, 2, 3);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + id + "' AND status = 'X' AND attempts = 3"
        + " AND last_error = 'java.io.IOException: broker down'")).isEqualTo(1);
    relay.runOnce();
    assertThat(attempts).hasSize(3); // parked: not tried again

    brokerUp.set(true);
    assertThat(idem.operations().redrive(id)).isEqualTo(1);
    assertThat(idem.operations().redrive(id)).isZero(); // no longer parked
    assertThat(relay.runOnce()).isEqualTo(1);
    assertThat(attempts).containsExactly(1, 2, 3, 1);
    assertThat(status(id)).isEqualTo("S");
    assertThat(idem.operations().redrive(UUID.randomUUID())).isZero();
    assertThatThrownBy(() -> idem.operations().redrive(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("id");
  }

  @Test
  void aPublisherThrowingAnErrorParksThatMessageAndTheOthersAreSentOnce() throws Exception {
    UUID good = enqueue(msg("good"));
    UUID poison = enqueue(msg("poison"));
    List<UUID> published = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> {
      if (m.id().equals(poison)) {
        throw new AssertionError("serializer bug");
      }
      published.add(m.id());
    }).maxAttempts(2).backoff(Duration.ofMillis(1), Duration.ofMillis(2)).build();

    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!"X".equals(status(poison))) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      relay.runOnce();
      Thread.sleep(5);
    }
    relay.runOnce();
    assertThat(published).containsExactly(good);
    assertThat(status(good)).isEqualTo("S");
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + poison + "' AND attempts = 2"
        + " AND last_error LIKE '%AssertionError: serializer bug%'")).isEqualTo(1);
  }

  /** A batch publisher: acknowledges the messages {@code acked} says, fails the others, all in one call. */
  static Publisher batchPublisher(List<UUID> published, java.util.function.Predicate<OutboxMessage> acked) {
    return new Publisher() {
      @Override
      public void publish(OutboxMessage m) {
        throw new AssertionError("the relay hands a batch to publishAll, never one message to publish");
      }

      @Override
      public List<Throwable> publishAll(List<OutboxMessage> batch) {
        List<Throwable> outcomes = new java.util.ArrayList<>();
        for (OutboxMessage m : batch) {
          if (acked.test(m)) {
            published.add(m.id());
            outcomes.add(null);
          } else {
            outcomes.add(new java.io.IOException("not acknowledged: " + new String(m.payload(), StandardCharsets.UTF_8)));
          }
        }
        return outcomes;
      }
    };
  }

  @Test
  void aBatchPublisherHasOnlyWhatItAcknowledgedMarkedSentAndTheRestBackedOffThenParked() throws Exception {
    List<UUID> ids = new java.util.ArrayList<>();
    for (int i = 0; i < 6; i++) {
      ids.add(enqueue(msg(i % 2 == 0 ? "ack" : "nack")));
    }
    List<UUID> published = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(batchPublisher(published, m -> new String(m.payload(), StandardCharsets.UTF_8).equals("ack")))
        .batchSize(10).maxAttempts(2).backoff(Duration.ofMillis(1), Duration.ofMillis(2)).build();

    assertThat(relay.runOnce()).isEqualTo(3);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(3);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'P' AND attempts = 1"
        + " AND last_error = 'java.io.IOException: not acknowledged: nack'")).isEqualTo(3);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (count("SELECT count(*) FROM idem_outbox WHERE status = 'X'") < 3) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      relay.runOnce();
      Thread.sleep(5);
    }
    assertThat(published).containsExactlyInAnyOrder(ids.get(0), ids.get(2), ids.get(4));
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'X' AND attempts = 2")).isEqualTo(3);
  }

  @Test
  void aBatchPublisherThatThrowsOrAnswersForTooFewMessagesHasNothingMarkedSent() {
    UUID a = enqueue(msg("a"));
    UUID b = enqueue(msg("b"));
    Publisher throwing = new Publisher() {
      @Override
      public void publish(OutboxMessage m) {}

      @Override
      public List<Throwable> publishAll(List<OutboxMessage> batch) throws Exception {
        throw new java.io.IOException("broker gone");
      }
    };
    assertThat(idem.relay(throwing).build().runOnce()).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'P' AND attempts = 1"
        + " AND last_error = 'java.io.IOException: broker gone'")).isEqualTo(2);

    sql("UPDATE idem_outbox SET next_attempt_at = " + clockPlus(Duration.ofSeconds(-1)));
    Publisher short1 = new Publisher() {
      @Override
      public void publish(OutboxMessage m) {}

      @Override
      public List<Throwable> publishAll(List<OutboxMessage> batch) {
        java.util.ArrayList<Throwable> one = new java.util.ArrayList<>();
        one.add(null);
        return one;
      }
    };
    assertThat(idem.relay(short1).build().runOnce()).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'P' AND attempts = 2"
        + " AND last_error LIKE '%publishAll answered for 1 messages instead of the batch''s 2%'")).isEqualTo(2);
    assertThat(List.of(status(a), status(b))).containsOnly("P");
  }

  /** Unbounded recursion, as a serializer meeting a cyclic object graph does. */
  static int recurse(int n) {
    return recurse(n + 1) + 1;
  }

  /**
   * A StackOverflowError is a VirtualMachineError, but the stack has unwound when it is caught: a
   * failed publish of that message, not a reason to roll the batch back (republishing the others)
   * or to end the relay's loop.
   */
  @Test
  void aPublisherStackOverflowParksThatMessageAndTheLoopGoesOnPublishingEachOtherOnce() throws Exception {
    UUID before = enqueue(msg("before"));
    UUID poison = enqueue(msg("poison"));
    UUID after = enqueue(msg("after"));
    List<UUID> published = new CopyOnWriteArrayList<>();
    UUID later;
    try (Relay relay = idem.relay(m -> {
      if (m.id().equals(poison)) {
        recurse(0);
      }
      published.add(m.id());
    }).maxAttempts(1).pollInterval(Duration.ofMillis(50)).build()) {
      assertThat(relay.runOnce()).isEqualTo(2);
      assertThat(published).containsExactly(before, after);
      assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + poison + "' AND status = 'X'"
          + " AND attempts = 1 AND last_error LIKE 'java.lang.StackOverflowError%'")).isEqualTo(1);

      // the same in the background loop, which must still be running for a later message
      sql("UPDATE idem_outbox SET status = 'P', attempts = 0 WHERE id = '" + poison + "'");
      relay.start();
      later = enqueue(msg("later"));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (!"S".equals(status(later)) || !"X".equals(status(poison))) {
        assertThat(System.nanoTime()).as("the loop sends a message enqueued after the overflow").isLessThan(deadline);
        Thread.sleep(10);
      }
    }
    assertThat(published).as("each good message published once").containsExactly(before, after, later);
    assertThat(status(before)).isEqualTo("S");
    assertThat(status(after)).isEqualTo("S");
  }

  /** An exception whose {@code toString()} itself throws, as a broken custom exception class can. */
  static final class UnprintableException extends RuntimeException {
    @Override
    public String toString() {
      throw new IllegalStateException("toString() of a broken exception");
    }
  }

  @Test
  void aPublisherErrorThatCannotBeStoredAsTextParksItsMessageAndTheOthersAreSentOnce() throws Exception {
    UUID good = enqueue(msg("good"));
    UUID nul = enqueue(msg("nul"));
    UUID unprintable = enqueue(msg("unprintable"));
    int calls = 12;
    List<RuntimeException> batchFailures = new ArrayList<>();
    try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
      pc.setAutoCommit(true);
      Relay relay = idem.relay(m -> {
        ps.setObject(1, m.id());
        ps.setInt(2, m.attempt());
        ps.executeUpdate(); // every call of the publisher, as a broker would see it
        if (m.id().equals(nul)) {
          throw new IOException("broker said \0 in reply"); // PostgreSQL refuses NUL in text
        }
        if (m.id().equals(unprintable)) {
          throw new UnprintableException();
        }
      }).maxAttempts(3).backoff(Duration.ofMillis(1), Duration.ofMillis(2)).build();
      for (int i = 0; i < calls; i++) {
        try {
          relay.runOnce();
        } catch (RuntimeException e) {
          batchFailures.add(e); // before the fix: the whole batch rolled back, sent marks included
        }
        Thread.sleep(5); // past the back-off of at most 2 ms
      }
    }
    assertThat(count("SELECT count(*) FROM published WHERE id = '" + good + "'")).as("publishes of the good message").isEqualTo(1);
    assertThat(status(good)).isEqualTo("S");
    assertThat(count("SELECT count(*) FROM published WHERE id = '" + nul + "'")).as("publishes of the NUL message").isEqualTo(3);
    assertThat(count("SELECT count(*) FROM published WHERE id = '" + unprintable + "'")).as("publishes of the unprintable one").isEqualTo(3);
    // bound, not a literal: a backslash in a MariaDB string literal escapes
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE id = '" + nul + "' AND status = 'X' AND attempts = 3"
        + " AND last_error = ?", "java.io.IOException: broker said \\u0000 in reply")).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + unprintable + "' AND status = 'X' AND attempts = 3"
        + " AND last_error LIKE '" + UnprintableException.class.getName() + "%' AND last_error LIKE '%toString() threw%'")).isEqualTo(1);
    assertThat(batchFailures).isEmpty();
  }

  @Test
  void whenTheDatabaseRefusesAFailureMarkTheSentMarksStillCommitAndTheOtherFailuresAreCounted() throws Exception {
    // Stands in for an error text the database cannot hold (a character outside its encoding):
    // the row of "refuse text" takes no error text but the fixed one; the row of "refuse all" takes
    // no failure mark at all.
    if (mariadb()) {
      sql("CREATE TRIGGER refuse_marks BEFORE UPDATE ON idem_outbox FOR EACH ROW BEGIN"
          + " IF NEW.status <> 'S' AND CAST(NEW.payload AS CHAR) = 'refuse all' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no failure mark'; END IF;"
          + " IF NEW.last_error LIKE '%broker down%' AND CAST(NEW.payload AS CHAR) = 'refuse text' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no such text'; END IF;"
          + " END");
    } else {
      sql("CREATE FUNCTION refuse_marks() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF NEW.status <> 'S' AND convert_from(NEW.payload, 'UTF8') = 'refuse all' THEN RAISE EXCEPTION 'no failure mark'; END IF;"
          + " IF NEW.last_error LIKE '%broker down%' AND convert_from(NEW.payload, 'UTF8') = 'refuse text' THEN RAISE EXCEPTION 'no such text'; END IF;"
          + " RETURN NEW; END $$;"
          + " CREATE TRIGGER refuse_marks BEFORE UPDATE ON idem_outbox FOR EACH ROW EXECUTE FUNCTION refuse_marks()");
    }
    try {
      UUID good = enqueue(msg("good"));
      UUID refuseText = enqueue(msg("refuse text"));
      UUID refuseAll = enqueue(msg("refuse all"));
      UUID counted = enqueue(msg("counted"));
      int calls = 6;
      try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
        pc.setAutoCommit(true);
        Relay relay = idem.relay(m -> {
          ps.setObject(1, m.id());
          ps.setInt(2, m.attempt());
          ps.executeUpdate();
          if (!m.id().equals(good)) {
            throw new IOException("broker down");
          }
        }).maxAttempts(2).backoff(Duration.ofMillis(1), Duration.ofMillis(2)).build();
        for (int i = 0; i < calls; i++) {
          relay.runOnce();
          Thread.sleep(5);
        }
      }
      assertThat(count("SELECT count(*) FROM published WHERE id = '" + good + "'")).isEqualTo(1);
      assertThat(status(good)).isEqualTo("S");
      assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + counted + "' AND status = 'X' AND attempts = 2"
          + " AND last_error = 'java.io.IOException: broker down'")).isEqualTo(1);
      assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + refuseText + "' AND status = 'X' AND attempts = 2"
          + " AND last_error = '" + Relay.UNSTORABLE_ERROR.replace("'", "''") + "'")).isEqualTo(1);
      // never counted, so tried on every call (and never parked): the log says so
      assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + refuseAll + "' AND status = 'P' AND attempts = 0")).isEqualTo(1);
      assertThat(count("SELECT count(*) FROM published WHERE id = '" + refuseAll + "'")).isEqualTo(calls);
    } finally {
      sql(mariadb() ? "DROP TRIGGER refuse_marks" : "DROP TRIGGER refuse_marks ON idem_outbox; DROP FUNCTION refuse_marks()");
    }
  }

  @Test
  void redriveAllMakesEveryParkedMessagePendingAgain() {
    UUID a = enqueue(msg("a"));
    UUID b = enqueue(msg("b"));
    Relay failing = idem.relay(m -> {
      throw new IOException("down");
    }).maxAttempts(1).build();
    failing.runOnce();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'X' AND attempts = 1 AND last_error = 'java.io.IOException: down'")).isEqualTo(2);
    UUID c = enqueue(msg("c"));
    assertThat(idem.operations().redriveAll()).isEqualTo(2);
    assertThat(idem.operations().redriveAll()).isZero();
    List<UUID> sent = new CopyOnWriteArrayList<>();
    assertThat(idem.relay(m -> sent.add(m.id())).build().runOnce()).isEqualTo(3);
    assertThat(sent).containsExactlyInAnyOrder(a, b, c);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(3);
  }

  @Test
  void aListeningRelayWakesOnANotifyingEnqueueLongBeforeItsPoll() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "LISTEN/NOTIFY is PostgreSQL's: on MariaDB a listening relay polls"
        + " (onMariaDbAListeningRelayPollsAndHoldsNoConnectionOfItsOwn)");
    Outbox notifying = outbox.notifying();
    List<UUID> sent = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> sent.add(m.id())).pollInterval(Duration.ofMinutes(10)).listen(true).build();
    String listener = Relay.class.getName() + "$Listener";
    long listening = threadsIn(listener, "await");
    relay.start();
    try {
      // wait until the loop LISTENs and has finished its first (empty) batch: it waits for a notification
      Poll.until("the loop waiting for a notification", () -> threadsIn(listener, "await") > listening);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      UUID id = idem.inTransaction(tx -> notifying.enqueue(tx.connection(), msg("wake up")));
      while (!sent.contains(id)) {
        assertThat(System.nanoTime()).as("woken by NOTIFY, not by the 10 minute poll").isLessThan(deadline);
        Thread.sleep(20);
      }
      assertThat(status(id)).isEqualTo("S");
    } finally {
      long t0 = System.nanoTime();
      relay.close();
      assertThat(System.nanoTime() - t0).as("close wakes the LISTEN wait").isLessThan(TimeUnit.SECONDS.toNanos(20));
    }
  }

  /**
   * How many threads are inside {@code method} of the class named {@code className}, in any state:
   * unlike {@link Poll#threadsWaitingIn}, a thread blocked in a socket read (RUNNABLE) counts.
   */
  static long threadsIn(String className, String method) {
    return Thread.getAllStackTraces().values().stream().filter(stack -> java.util.Arrays.stream(stack)
        .anyMatch(f -> f.getClassName().equals(className) && f.getMethodName().equals(method))).count();
  }

  /**
   * How many LISTEN channels the sessions of {@code pool} hold: borrows all {@code size} connections
   * at once (so the one a relay gave back is among them) and asks each session.
   */
  static long listeningChannels(DataSource pool, int size) throws SQLException {
    List<Connection> held = new ArrayList<>();
    try {
      long channels = 0;
      for (int i = 0; i < size; i++) {
        Connection c = pool.getConnection();
        held.add(c);
        try (var st = c.createStatement(); var rs = st.executeQuery("SELECT count(*) FROM pg_listening_channels()")) {
          rs.next();
          channels += rs.getLong(1);
        }
      }
      return channels;
    } finally {
      for (Connection c : held) {
        c.close();
      }
    }
  }

  /** Starts {@code relay}, waits until its loop published a message (so it set up its LISTEN first), and closes it. */
  static void runUntilOnePublishedAndClose(Relay relay) throws Exception {
    UUID id = enqueue(msg("wake"));
    relay.start();
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (!"S".equals(status(id))) {
        assertThat(System.nanoTime()).isLessThan(deadline);
        Thread.sleep(10);
      }
    } finally {
      relay.close();
    }
  }

  @Test
  void aClosedRelayStartsAgainOnTheGivenThreadsAndPublishesWhatCameMeanwhile() throws Exception {
    List<String> threads = new CopyOnWriteArrayList<>();
    List<Thread> loops = new CopyOnWriteArrayList<>();
    AtomicInteger made = new AtomicInteger();
    List<OutboxMessage> seen = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> {
      threads.add(Thread.currentThread().getName());
      seen.add(m);
    }).pollInterval(Duration.ofMillis(20)).threadFactory(r -> {
      Thread loop = new Thread(r, "mine-" + made.incrementAndGet());
      loops.add(loop);
      return loop;
    }).build();
    assertThat(relay.isRunning()).isFalse();
    runUntilOnePublishedAndClose(relay);
    assertThat(relay.isRunning()).isFalse();
    // a stopped relay publishes nothing: its loop has ended, so the message waits
    assertThat(loops).hasSize(1).noneMatch(Thread::isAlive);
    UUID meanwhile = enqueue(msg("while stopped"));
    assertThat(status(meanwhile)).isEqualTo("P");
    runUntilOnePublishedAndClose(relay);
    assertThat(status(meanwhile)).isEqualTo("S");
    assertThat(made).hasValue(2);
    assertThat(threads).containsOnly("mine-1", "mine-2");
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(3);
    assertThat(seen).extracting(OutboxMessage::id).doesNotHaveDuplicates().contains(meanwhile);
    assertThatThrownBy(() -> idem.relay(m -> {}).shutdownTimeout(Duration.ZERO).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("shutdownTimeout");
    assertThatThrownBy(() -> idem.relay(m -> {}).threadFactory(null).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("threadFactory");
  }

  @Test
  void publishesAndFailuresAreEventsAfterTheBatchCommitsAndAParkingSaysSo() {
    UUID ok = enqueue(msg("ok"));
    UUID poison = enqueue(NewMessage.of("poison", new byte[] {1}));
    List<IdemEvent> seen = new CopyOnWriteArrayList<>();
    IdemListener listener = new IdemListener() {
      @Override
      public void onPublished(IdemEvent.Published e) {
        seen.add(e);
      }

      @Override
      public void onPublishFailed(IdemEvent.PublishFailed e) {
        // delivered after the commit: the failure is counted in the row already
        assertThat(count("SELECT attempts FROM idem_outbox WHERE id = '" + e.id() + "'")).isEqualTo(e.attempt());
        seen.add(e);
      }
    };
    Relay relay = Idem.builder(ds).listener(listener).build().relay(m -> {
      if (m.topic().equals("poison")) {
        throw new IllegalStateException("cannot serialize");
      }
    }).maxAttempts(2).backoff(Duration.ofMillis(1), Duration.ofMillis(1)).build();
    relay.runOnce();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!"X".equals(status(poison))) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      relay.runOnce();
    }
    assertThat(seen).filteredOn(IdemEvent.Published.class::isInstance).singleElement()
        .satisfies(e -> assertThat(((IdemEvent.Published) e).id()).isEqualTo(ok));
    List<IdemEvent.PublishFailed> failures = seen.stream().filter(IdemEvent.PublishFailed.class::isInstance)
        .map(IdemEvent.PublishFailed.class::cast).toList();
    assertThat(failures).extracting(IdemEvent.PublishFailed::attempt).containsExactly(1, 2);
    assertThat(failures).extracting(IdemEvent.PublishFailed::parked).containsExactly(false, true);
    assertThat(failures).allSatisfy(f -> assertThat(f.id()).isEqualTo(poison)).allSatisfy(f -> assertThat(f.error()).contains("cannot serialize"));
    assertThat(status(ok)).isEqualTo("S");
  }

  @Test
  void closeWaitsNoLongerThanTheShutdownTimeoutForAPublishThatIgnoresInterrupts() throws Exception {
    enqueue(msg("stuck"));
    CountDownLatch publishing = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Relay relay = idem.relay(m -> {
      publishing.countDown();
      while (true) {
        try {
          if (release.await(30, TimeUnit.SECONDS)) {
            return;
          }
        } catch (InterruptedException ignored) {
          // a broker client that swallows the interrupt
        }
      }
    }).shutdownTimeout(Duration.ofMillis(500)).build();
    relay.start();
    assertThat(publishing.await(20, TimeUnit.SECONDS)).isTrue();
    long t0 = System.nanoTime();
    relay.close();
    long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertThat(tookMs).isGreaterThanOrEqualTo(400).isLessThan(5_000);
    assertThatThrownBy(relay::start).isInstanceOf(IllegalStateException.class).hasMessageContaining("has not ended yet");
    release.countDown();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (count("SELECT count(*) FROM idem_outbox WHERE status = 'S'") == 0) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      Thread.sleep(10);
    }
  }

  @Test
  void aClosedListeningRelayGivesItsConnectionBackNoLongerListening() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "LISTEN is PostgreSQL's");
    try (HikariDataSource pool = db.dataSource(3)) {
      Relay relay = Idem.builder(pool).build().relay(m -> {}).listen(true).pollInterval(Duration.ofMinutes(10)).build();
      runUntilOnePublishedAndClose(relay);
      assertThat(listeningChannels(pool, 3)).as("channels still listened to on the pool's connections").isZero();
    }
  }

  @Test
  void aListeningConnectionThatCannotUnlistenIsNotGivenBackToThePool() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "LISTEN is PostgreSQL's");
    try (HikariDataSource pool = db.dataSource(3)) {
      DataSource unlistenFails = FaultyDataSource.wrap(pool,
          (method, args) -> method.equals("execute") && args[0].toString().startsWith("UNLISTEN") ? new SQLException("UNLISTEN refused") : null);
      Relay relay = Idem.builder(unlistenFails).build().relay(m -> {}).listen(true).pollInterval(Duration.ofMinutes(10)).build();
      runUntilOnePublishedAndClose(relay);
      assertThat(listeningChannels(pool, 3)).as("channels still listened to on the pool's connections").isZero();
    }
  }

  @Test
  void aListeningRelayThatCannotListenPollsAndListensAgainOnceItCan() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "LISTEN is PostgreSQL's");
    AtomicBoolean driverBroken = new AtomicBoolean(true);
    try (HikariDataSource pool = db.dataSource(3)) {
      // the relay needs the driver's PGConnection to read notifications: make that fail for a while
      DataSource noPgConnection = FaultyDataSource.wrap(pool, (method, args) -> driverBroken.get() && method.equals("unwrap")
          && args[0] == org.postgresql.PGConnection.class ? new SQLException("no PGConnection behind this pool") : null);
      List<UUID> ids = idem.inTransaction(tx -> outbox.enqueueAll(tx.connection(), List.of(msg("1"), msg("2"), msg("3"), msg("4"), msg("5"))));
      try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, 0)")) {
        pc.setAutoCommit(true);
        Relay relay = Idem.builder(noPgConnection).build().relay(m -> {
          ps.setObject(1, m.id());
          ps.executeUpdate();
        }).listen(true).pollInterval(Duration.ofMillis(100)).build();
        relay.start();
        try {
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
          while (count("SELECT count(*) FROM idem_outbox WHERE status = 'S'") < ids.size()) {
            assertThat(System.nanoTime()).as("published by polling without LISTEN").isLessThan(deadline);
            Thread.sleep(10);
          }
          assertThat(count("SELECT count(*) FROM published")).isEqualTo(ids.size());
          assertThat(count("SELECT count(DISTINCT id) FROM published WHERE id " + in(ids))).isEqualTo(ids.size());
          assertThat(count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'")).isZero();

          driverBroken.set(false);
          while (count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'") == 0) {
            assertThat(System.nanoTime()).as("LISTEN tried again").isLessThan(deadline);
            Thread.sleep(10);
          }
        } finally {
          relay.close();
        }
      }
    }
  }

  /**
   * MariaDB has no LISTEN: a relay built to listen polls at its interval, and holds no connection
   * between batches (on PostgreSQL its LISTEN holds one for as long as the loop runs).
   */
  @Test
  void onMariaDbAListeningRelayPollsAndHoldsNoConnectionOfItsOwn() throws Exception {
    Assumptions.assumeTrue(mariadb(), "PostgreSQL listens: aListeningRelayWakesOnANotifyingEnqueueLongBeforeItsPoll");
    try (HikariDataSource pool = db.dataSource(1)) {
      Relay relay = Idem.builder(pool).build().relay(m -> {}).listen(true).pollInterval(Duration.ofMillis(50)).build();
      UUID first = enqueue(msg("first"));
      relay.start();
      try {
        Poll.until("the first message published by polling", () -> "S".equals(status(first)));
        // the pool's one connection is free between batches: nothing listens on it
        Poll.until("no connection held between batches", () -> pool.getHikariPoolMXBean().getActiveConnections() == 0);
        UUID second = idem.inTransaction(tx -> outbox.notifying().enqueue(tx.connection(), msg("second")));
        Poll.until("the second message published at the next poll", () -> "S".equals(status(second)));
      } finally {
        relay.close();
      }
    }
  }

  @Test
  void theOrderedLoopDrainsOneKeysBacklogBackToBackNotOneMessagePerPollInterval() throws Exception {
    drainOneKeyWithAPoisonMessageBeside(true);
  }

  @Test
  void theUnorderedLoopAlsoRunsBackToBackWhileItSendsAndWaitsWhenAllItFindsFails() throws Exception {
    drainOneKeyWithAPoisonMessageBeside(false);
  }

  /**
   * A background loop with a 10 s poll interval, a backlog of 50 messages of one key, and beside it
   * a message whose publish always fails: the backlog goes out within 5 s (far less than one poll
   * interval, so polling cannot do it; one message per poll would take 500 s), in order when
   * ordered, each once; then, with nothing left but the failing message, the loop waits instead of
   * spinning on it.
   */
  void drainOneKeyWithAPoisonMessageBeside(boolean ordered) throws Exception {
    int backlog = 50;
    List<NewMessage> batch = new ArrayList<>();
    for (int i = 0; i < backlog; i++) {
      batch.add(msg("a" + i).withAggregateKey("A"));
    }
    List<UUID> ids = idem.inTransaction(tx -> outbox.enqueueAll(tx.connection(), batch));
    UUID poison = enqueue(msg("poison").withAggregateKey("P"));
    AtomicInteger seq = new AtomicInteger();
    try (Connection pc = ds.getConnection(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
      pc.setAutoCommit(true);
      Relay relay = idem.relay(m -> {
        ps.setObject(1, m.id());
        ps.setInt(2, seq.incrementAndGet()); // the order of publishes
        ps.executeUpdate();
        if (m.id().equals(poison)) {
          throw new IOException("always fails");
        }
      }).orderedByAggregateKey(ordered).batchSize(7).pollInterval(Duration.ofSeconds(10))
          .maxAttempts(1_000).backoff(Duration.ofMillis(1), Duration.ofMillis(1)).build();
      relay.start();
      try {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (count("SELECT count(*) FROM idem_outbox WHERE status = 'S'") < backlog) {
          assertThat(System.nanoTime()).as("the backlog drained well within one 10 s poll interval").isLessThan(deadline);
          Thread.sleep(10);
        }
        String attemptsOfPoison = "SELECT count(*) FROM published WHERE id = '" + poison + "'";
        long before = count(attemptsOfPoison);
        Thread.sleep(300);
        assertThat(count(attemptsOfPoison)).as("tries of the failing message once nothing else is left").isLessThanOrEqualTo(before + 1);
      } finally {
        relay.close();
      }
    }
    assertThat(count("SELECT count(*) FROM published WHERE id " + in(ids))).isEqualTo(backlog);
    assertThat(count("SELECT count(DISTINCT id) FROM published WHERE id " + in(ids))).isEqualTo(backlog);
    if (ordered) {
      // no pair of A's messages published in the opposite order of their ids (the enqueue order)
      assertThat(count("SELECT count(*) FROM published x JOIN published y ON x.relay < y.relay AND x.id > y.id"
          + " WHERE x.id <> '" + poison + "' AND y.id <> '" + poison + "'")).isZero();
    }
  }

  @Test
  void durationsPastTheirLimitsAreRefusedAtBuildAndTheLimitsWorkAgainstTheDatabase() throws Exception {
    Publisher failing = m -> {
      throw new IOException("down");
    };
    assertThatThrownBy(() -> idem.relay(failing).retention(Duration.ofDays(36_501)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("retention must be at most 36500 days");
    assertThatThrownBy(() -> idem.relay(failing).retention(Duration.ofSeconds(Long.MAX_VALUE)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("retention must be at most 36500 days");
    assertThatThrownBy(() -> idem.relay(failing).backoff(Duration.ofSeconds(1), Duration.ofDays(366)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max backoff must be at most 365 days");
    assertThatThrownBy(() -> idem.relay(failing).backoff(Duration.ofDays(366), Duration.ofDays(367)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("initial backoff must be at most 365 days");
    assertThatThrownBy(() -> idem.relay(failing).pollInterval(Duration.ofDays(1).plusMillis(1)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pollInterval must be at most 1 day");
    assertThatThrownBy(() -> idem.relay(failing).pollInterval(Duration.ofSeconds(Long.MAX_VALUE)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pollInterval must be at most 1 day");

    // at the limits, every time the relay computes stays within the database's range
    Relay atLimits = idem.relay(failing).retention(Relay.MAX_RETENTION).pollInterval(Relay.MAX_POLL_INTERVAL)
        .backoff(Relay.MAX_BACKOFF, Relay.MAX_BACKOFF).build();
    UUID far = enqueue(msg("far"));
    assertThat(atLimits.runOnce()).isZero();
    assertThat(atLimits.purgeSent()).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + far + "' AND status = 'P' AND attempts = 1"
        + " AND next_attempt_at BETWEEN " + clockPlus(Duration.ofDays(182)) + " AND " + clockPlus(Duration.ofDays(365)))).isEqualTo(1);

    // the 21st failure with an initial back-off of 2^44 microseconds (about 204 days): 2^44 << 20
    // overflows to 0, which must not mean "no back-off"
    UUID late = enqueue(msg("late"));
    sql("UPDATE idem_outbox SET attempts = 20 WHERE id = '" + late + "'");
    Relay doubling = idem.relay(failing).backoff(Duration.of(1L << 44, ChronoUnit.MICROS), Relay.MAX_BACKOFF).maxAttempts(100).build();
    assertThat(doubling.runOnce()).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + late + "' AND status = 'P' AND attempts = 21"
        + " AND next_attempt_at >= " + clockPlus(Duration.ofDays(182)))).as("backing off the capped 365 days").isEqualTo(1);
  }

  @Test
  void theOrderedRelayKeepsOrderPerAggregateKeyEvenAcrossAFailure() throws Exception {
    List<String> expectedA = new ArrayList<>();
    List<String> expectedB = new ArrayList<>();
    idem.useTransaction(tx -> {
      for (int i = 0; i < 5; i++) {
        outbox.enqueue(tx.connection(), msg("a" + i).withAggregateKey("A"));
        expectedA.add("a" + i);
        outbox.enqueue(tx.connection(), msg("b" + i).withAggregateKey("B"));
        expectedB.add("b" + i);
      }
    });
    AtomicInteger failuresLeft = new AtomicInteger(1);
    List<String> order = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(m -> {
      String text = new String(m.payload(), StandardCharsets.UTF_8);
      if (text.equals("a0") && failuresLeft.getAndDecrement() > 0) {
        throw new IOException("a0 fails once");
      }
      order.add(text);
    }).orderedByAggregateKey(true).backoff(Duration.ofMillis(600), Duration.ofSeconds(1)).build();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (count("SELECT count(*) FROM idem_outbox WHERE status <> 'S'") > 0) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      relay.runOnce();
      Thread.sleep(10);
    }
    assertThat(order.stream().filter(s -> s.startsWith("a")).toList()).isEqualTo(expectedA);
    assertThat(order.stream().filter(s -> s.startsWith("b")).toList()).isEqualTo(expectedB);
    // B was not held up by A's failing head (backing off at least 300 ms): one B message per batch went on
    assertThat(order.indexOf("b4")).isLessThan(order.indexOf("a0"));
  }

  @Test
  void twoOrderedRelaysAtOnceKeepOrderPerKey() throws Exception {
    int keys = 5;
    int perKey = 40;
    idem.useTransaction(tx -> {
      for (int i = 0; i < perKey; i++) {
        for (int k = 0; k < keys; k++) {
          outbox.enqueue(tx.connection(), msg(k + ":" + i).withAggregateKey("key-" + k));
        }
      }
    });
    List<String> order = Collections.synchronizedList(new ArrayList<>());
    ExecutorService pool = Executors.newFixedThreadPool(2);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<?>> relays = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      Relay relay = idem.relay(m -> order.add(new String(m.payload(), StandardCharsets.UTF_8))).orderedByAggregateKey(true).build();
      relays.add(pool.submit(() -> {
        go.await();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (count("SELECT count(*) FROM idem_outbox WHERE status <> 'S'") > 0 && System.nanoTime() < deadline) {
          relay.runOnce();
        }
        return null;
      }));
    }
    go.countDown();
    for (Future<?> f : relays) {
      f.get(90, TimeUnit.SECONDS);
    }
    pool.shutdown();
    assertThat(order).hasSize(keys * perKey).doesNotHaveDuplicates();
    for (int k = 0; k < keys; k++) {
      String prefix = k + ":";
      List<Integer> seq = order.stream().filter(s -> s.startsWith(prefix)).map(s -> Integer.parseInt(s.substring(prefix.length()))).toList();
      assertThat(seq).as("order of key-" + k).isSorted().hasSize(perKey);
    }
  }

  @Test
  void retentionDeletesSentMessagesOnlyAndInBatches() throws Exception {
    idem.useTransaction(tx -> {
      for (int i = 0; i < 2500; i++) {
        outbox.enqueue(tx.connection(), msg("s" + i));
      }
    });
    Relay relay = idem.relay(m -> {}).batchSize(500).retention(Duration.ofMillis(100)).build();
    while (relay.runOnce() > 0) {
      // drain
    }
    UUID pending = enqueue(msg("still pending"));
    Relay keeper = idem.relay(m -> {}).retention(Duration.ofDays(7)).build();
    Poll.until("every sent message past the 100 ms retention on the database clock", () -> count("SELECT count(*)"
        + " FROM idem_outbox WHERE status = 'S' AND sent_at >= " + clockPlus(Duration.ofMillis(-100))) == 0);
    assertThat(keeper.purgeSent()).isZero();
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(2500);
    assertThat(relay.purgeSent()).isEqualTo(2500);
    assertThat(count("SELECT count(*) FROM idem_outbox")).isEqualTo(1);
    assertThat(status(pending)).isEqualTo("P");
  }

  @Test
  void theBackgroundLoopDrainsAndStopsCleanly() throws Exception {
    Relay relay = idem.relay(m -> {}).pollInterval(Duration.ofMillis(20)).build();
    relay.start();
    assertThatThrownBy(relay::start).isInstanceOf(IllegalStateException.class);
    try {
      idem.useTransaction(tx -> {
        for (int i = 0; i < 250; i++) {
          outbox.enqueue(tx.connection(), msg("bg" + i));
        }
      });
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (count("SELECT count(*) FROM idem_outbox WHERE status = 'S'") < 250) {
        assertThat(System.nanoTime()).isLessThan(deadline);
        Thread.sleep(20);
      }
    } finally {
      relay.close();
    }
    relay.close(); // idempotent
    // no loop left to publish: a message enqueued now waits
    assertThat(Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("idem-relay")).filter(Thread::isAlive)).isEmpty();
    UUID after = enqueue(msg("after close"));
    assertThat(status(after)).isEqualTo("P");
  }
}
