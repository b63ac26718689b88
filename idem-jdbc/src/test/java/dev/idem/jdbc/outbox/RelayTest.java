package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class RelayTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start() throws SQLException {
    db = TestPostgres.newDatabase("relay");
    ds = db.dataSource(12);
    idem = Idem.builder(ds).build();
    idem.migrate();
    exec("CREATE TABLE publish_log (seq bigserial PRIMARY KEY, id uuid NOT NULL, aggregate_key text, attempt int NOT NULL)");
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  @BeforeEach
  void empty() throws SQLException {
    exec("TRUNCATE idem.idem_outbox, publish_log");
  }

  static void exec(String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  static long count(String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /**
   * A publisher that stands for a broker: it records each publish in publish_log on a connection
   * of its own, in auto-commit, so a publish stays recorded whatever the relay's transaction does.
   */
  static final class LoggingPublisher implements Publisher, AutoCloseable {
    final Connection c;
    final PreparedStatement ps;

    LoggingPublisher() throws SQLException {
      c = db.connect();
      ps = c.prepareStatement("INSERT INTO publish_log (id, aggregate_key, attempt) VALUES (?, ?, ?)");
    }

    @Override
    public void publish(OutboxMessage m) throws SQLException {
      ps.setObject(1, m.id());
      ps.setString(2, m.aggregateKey());
      ps.setInt(3, m.attempt());
      ps.executeUpdate();
    }

    @Override
    public void close() throws SQLException {
      c.close();
    }
  }

  static List<UUID> enqueue(int n, String topic, String... keys) {
    return idem.inTransaction(tx -> {
      List<UUID> ids = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        NewMessage m = NewMessage.of(topic, ("m" + i).getBytes()).withHeader("i", Integer.toString(i));
        if (keys.length > 0) {
          m = m.withAggregateKey(keys[i % keys.length]);
        }
        ids.add(idem.outbox().enqueue(tx, m));
      }
      return ids;
    });
  }

  @Test
  void runOncePublishesEachMessageWithItsIdAndMarksItSent() throws Exception {
    List<UUID> ids = enqueue(3, "t");
    List<OutboxMessage> seen = new ArrayList<>();
    Relay relay = idem.relay(seen::add).batchSize(10).build();
    assertThat(relay.runOnce()).isEqualTo(3);
    assertThat(seen).extracting(OutboxMessage::id).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(seen).allSatisfy(m -> {
      assertThat(m.topic()).isEqualTo("t");
      assertThat(m.attempt()).isEqualTo(1);
      assertThat(m.headers()).containsKey("i");
      assertThat(new String(m.payload())).isEqualTo("m" + m.headers().get("i"));
    });
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'S' AND sent_at IS NOT NULL AND attempts = 1")).isEqualTo(3);
    assertThat(relay.runOnce()).isZero();
    assertThat(seen).hasSize(3);
  }

  @Test
  void fourRelaysDrainTenThousandMessagesPublishingEachExactlyOnce() throws Exception {
    for (int i = 0; i < 10; i++) {
      enqueue(1000, "bulk");
    }
    int relays = 4;
    ExecutorService pool = Executors.newFixedThreadPool(relays);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<Integer>> done = new ArrayList<>();
    try {
      for (int r = 0; r < relays; r++) {
        done.add(pool.submit(() -> {
          try (LoggingPublisher log = new LoggingPublisher()) {
            Relay relay = idem.relay(log).batchSize(100).build();
            go.await();
            int total = 0;
            for (int n; (n = relay.runOnce()) > 0; ) {
              total += n;
            }
            return total;
          }
        }));
      }
      go.countDown();
      int total = 0;
      List<Integer> perRelay = new ArrayList<>();
      for (Future<Integer> f : done) {
        perRelay.add(f.get());
        total += perRelay.get(perRelay.size() - 1);
      }
      assertThat(total).isEqualTo(10_000);
      assertThat(perRelay).allSatisfy(n -> assertThat(n).isPositive()); // they shared the work
    } finally {
      pool.shutdownNow();
    }
    assertThat(count("SELECT count(*) FROM publish_log")).isEqualTo(10_000);
    assertThat(count("SELECT count(DISTINCT id) FROM publish_log")).isEqualTo(10_000);
    assertThat(count("SELECT count(*) FROM (SELECT id FROM publish_log GROUP BY id HAVING count(*) > 1) twice")).isZero();
    assertThat(count("SELECT count(*) FROM idem.idem_outbox o JOIN publish_log p ON p.id = o.id WHERE o.status = 'S'")).isEqualTo(10_000);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status <> 'S'")).isZero();
  }

  @Test
  void aFailingPublishBacksOffThenParksWithItsErrorAndARedriveSendsIt() throws Exception {
    UUID id = enqueue(1, "flaky").get(0);
    AtomicInteger calls = new AtomicInteger();
    Relay failing = idem.relay(m -> {
      calls.incrementAndGet();
      throw new IOException("broker down (attempt " + m.attempt() + ")");
    }).maxAttempts(3).backoff(Duration.ofMillis(200), Duration.ofMillis(400)).build();

    assertThat(failing.runOnce()).isZero();
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'P' AND attempts = 1"
        + " AND last_error LIKE '%broker down (attempt 1)%' AND next_attempt_at > clock_timestamp() + interval '50 milliseconds'")).isEqualTo(1);
    assertThat(failing.runOnce()).isZero(); // backing off: not due, not tried
    assertThat(calls).hasValue(1);

    for (int i = 0; i < 100 && count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'X'") == 0; i++) {
      failing.runOnce();
      Thread.sleep(20);
    }
    assertThat(calls).hasValue(3);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'X' AND attempts = 3 AND last_error LIKE '%broker down (attempt 3)%'")).isEqualTo(1);

    try (LoggingPublisher log = new LoggingPublisher()) {
      Relay working = idem.relay(log).build();
      assertThat(working.runOnce()).isZero(); // parked: not sent, not dropped
      assertThat(idem.outbox().redrive(id)).isTrue();
      assertThat(idem.outbox().redrive(id)).isFalse(); // pending now, not parked
      assertThat(working.runOnce()).isEqualTo(1);
    }
    assertThat(count("SELECT count(*) FROM publish_log WHERE id = '" + id + "' AND attempt = 1")).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'S' AND last_error IS NULL")).isEqualTo(1);
    assertThat(idem.outbox().redrive(id)).isFalse(); // sent
  }

  @Test
  void aFailureInTheMiddleOfABatchKeepsTheOthersSent() throws Exception {
    List<UUID> ids = enqueue(5, "mixed");
    UUID bad = ids.get(2);
    Relay relay = idem.relay(m -> {
      if (m.id().equals(bad)) {
        throw new IllegalStateException("poison");
      }
    }).build();
    assertThat(relay.runOnce()).isEqualTo(4);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'S'")).isEqualTo(4);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'P' AND attempts = 1 AND id = '" + bad + "'")).isEqualTo(1);
  }

  @Test
  void orderedModeKeepsPerKeyOrderAcrossConcurrentRelays() throws Exception {
    List<UUID> ids = enqueue(300, "ordered", "k1", "k2", "k3", "k4", "k5");
    // a failing head blocks its key only: k1's first message fails once
    UUID head = ids.get(0);
    AtomicBoolean failedOnce = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(3);
    CountDownLatch go = new CountDownLatch(1);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int r = 0; r < 3; r++) {
        done.add(pool.submit(() -> {
          try (LoggingPublisher log = new LoggingPublisher()) {
            Relay relay = idem.relay(m -> {
              if (m.id().equals(head) && failedOnce.compareAndSet(false, true)) {
                throw new IOException("first try fails");
              }
              log.publish(m);
            }).orderedByAggregateKey(true).backoff(Duration.ofMillis(50), Duration.ofMillis(50)).batchSize(50).build();
            go.await();
            while (count("SELECT count(*) FROM idem.idem_outbox WHERE status <> 'S'") > 0) {
              if (relay.runOnce() == 0) {
                Thread.sleep(5);
              }
            }
          }
          return null;
        }));
      }
      go.countDown();
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(failedOnce).isTrue();
    assertThat(count("SELECT count(*) FROM publish_log")).isEqualTo(300);
    // per key, the publish order (seq) is the enqueue order (id)
    assertThat(count("SELECT count(*) FROM (SELECT id, row_number() OVER (PARTITION BY aggregate_key ORDER BY seq) AS by_publish,"
        + " row_number() OVER (PARTITION BY aggregate_key ORDER BY id) AS by_enqueue FROM publish_log) x WHERE by_publish <> by_enqueue")).isZero();
    // and the enqueue order is the order the ids were returned in
    List<UUID> k1 = new ArrayList<>();
    for (int i = 0; i < ids.size(); i += 5) {
      k1.add(ids.get(i));
    }
    assertThat(k1).isSorted();
  }

  @Test
  void orderedModeDoesNotPassAParkedHead() throws Exception {
    List<UUID> ids = enqueue(2, "blocked", "only-key");
    UUID head = ids.get(0);
    try (LoggingPublisher log = new LoggingPublisher()) {
      Relay relay = idem.relay(m -> {
        if (m.id().equals(head)) {
          throw new IOException("nope");
        }
        log.publish(m);
      }).orderedByAggregateKey(true).maxAttempts(1).build();
      assertThat(relay.runOnce()).isZero();
      assertThat(relay.runOnce()).isZero();
      assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'X'")).isEqualTo(1);
      assertThat(count("SELECT count(*) FROM publish_log")).isZero(); // the second waits behind the parked head
      idem.outbox().redrive(head);
      Relay healthy = idem.relay(log).orderedByAggregateKey(true).build();
      assertThat(healthy.runOnce()).isEqualTo(1);
      assertThat(healthy.runOnce()).isEqualTo(1);
    }
    assertThat(count("SELECT count(*) FROM publish_log WHERE id = '" + head + "' AND seq = (SELECT min(seq) FROM publish_log)")).isEqualTo(1);
  }

  @Test
  void sentMessagesPastTheRetentionAreDeletedAndNothingElse() throws Exception {
    enqueue(5, "old");
    Relay relay = idem.relay(m -> {}).retention(Duration.ofMillis(100)).build();
    assertThat(relay.runOnce()).isEqualTo(5);
    enqueue(2, "pending");
    Relay keepLong = idem.relay(m -> {}).retention(Duration.ofDays(1)).build();
    assertThat(keepLong.purgeSent()).isZero();
    Thread.sleep(200);
    assertThat(relay.purgeSent()).isEqualTo(5);
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'S'")).isZero();
    assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'P' AND topic = 'pending'")).isEqualTo(2);
  }

  @Test
  void theBackgroundLoopRelaysUntilClosed() throws Exception {
    try (LoggingPublisher log = new LoggingPublisher()) {
      Relay relay = idem.relay(log).pollInterval(Duration.ofMillis(20)).build();
      relay.start();
      try {
        enqueue(250, "loop");
        for (int i = 0; i < 500 && count("SELECT count(*) FROM publish_log") < 250; i++) {
          Thread.sleep(10);
        }
        assertThat(count("SELECT count(*) FROM publish_log")).isEqualTo(250);
      } finally {
        relay.close();
      }
      relay.close(); // idempotent
      enqueue(1, "after-close");
      Thread.sleep(100);
      assertThat(count("SELECT count(*) FROM publish_log")).isEqualTo(250);
      assertThat(count("SELECT count(*) FROM idem.idem_outbox WHERE status = 'P' AND topic = 'after-close'")).isEqualTo(1);
    }
  }
}
