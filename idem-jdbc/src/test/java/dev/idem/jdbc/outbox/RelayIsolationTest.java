package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Four relays at once on a pool whose connections run at each isolation level (READ UNCOMMITTED to
 * SERIALIZABLE; PostgreSQL runs READ UNCOMMITTED as READ COMMITTED, MariaDB has all four), with a
 * tenth of the messages failing their first publish and a janitor purging sent rows meanwhile. A
 * relay batch runs at READ COMMITTED whatever the pool's level: at SERIALIZABLE, batches claiming
 * rows the others had read used to abort after publishing and publish again (3,700 publishes for
 * 2,000 messages), and at REPEATABLE READ a claim behind another relay's marks failed with 40001.
 */
// published: no unique index, so that duplicates show
@IdemTest(poolSize = 2, sql = "CREATE TABLE published (id uuid NOT NULL, payload text NOT NULL)")
class RelayIsolationTest {

  @ParameterizedTest
  @CsvSource({"TRANSACTION_READ_UNCOMMITTED, false", "TRANSACTION_READ_COMMITTED, false",
      "TRANSACTION_REPEATABLE_READ, false", "TRANSACTION_SERIALIZABLE, false",
      "TRANSACTION_READ_UNCOMMITTED, true", "TRANSACTION_READ_COMMITTED, true",
      "TRANSACTION_REPEATABLE_READ, true", "TRANSACTION_SERIALIZABLE, true"})
  void fourRelaysPublishEachMessageOnceAndNeverFail(String isolation, boolean ordered, TestDatabase db) throws Exception {
    db.execute("TRUNCATE published; TRUNCATE idem_outbox");
    int messages = ordered ? 1_000 : 2_000;
    int keys = 50;
    try (HikariDataSource pool = db.dataSource(10, isolation)) {
      Idem idem = Idem.builder(pool).build();
      Outbox outbox = idem.outbox();
      idem.useTransaction(tx -> {
        List<NewMessage> batch = new ArrayList<>();
        for (int i = 0; i < messages; i++) {
          NewMessage m = NewMessage.of("orders", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
          batch.add(ordered ? m.withAggregateKey("key-" + i % keys) : m);
        }
        outbox.enqueueAll(tx.connection(), batch);
      });
      Set<UUID> failedOnce = ConcurrentHashMap.newKeySet();
      Map<String, List<Integer>> orderPerKey = new ConcurrentHashMap<>();
      ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
      ExecutorService threads = Executors.newFixedThreadPool(5);
      CountDownLatch go = new CountDownLatch(1);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      List<Future<?>> done = new ArrayList<>();
      for (int r = 0; r < 4; r++) {
        done.add(threads.submit(() -> {
          // each relay's publisher writes what it sent on its own connection, as a broker would keep it
          try (Connection pc = db.connect(); PreparedStatement ps = pc.prepareStatement("INSERT INTO published VALUES (?, ?)")) {
            Relay relay = idem.relay(m -> {
              if (m.id().hashCode() % 10 == 0 && failedOnce.add(m.id())) {
                throw new IllegalStateException("the broker refused it once");
              }
              String payload = new String(m.payload(), StandardCharsets.UTF_8);
              ps.setObject(1, m.id());
              ps.setString(2, payload);
              ps.executeUpdate();
              if (m.aggregateKey() != null) {
                orderPerKey.computeIfAbsent(m.aggregateKey(), k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(Integer.parseInt(payload));
              }
            }).batchSize(50).orderedByAggregateKey(ordered).backoff(Duration.ofMillis(1), Duration.ofMillis(2))
                .retention(Duration.ofNanos(1_000)).build();
            go.await();
            for (int idle = 0; idle < 20 && System.nanoTime() < deadline; ) {
              try {
                int sent = relay.runOnce();
                idle = sent == 0 ? idle + 1 : 0;
                if (sent == 0) {
                  Thread.sleep(5);
                }
              } catch (RuntimeException e) {
                failures.add(e);
              }
            }
          }
          return null;
        }));
      }
      done.add(threads.submit(() -> {
        Relay janitor = idem.relay(m -> {}).retention(Duration.ofNanos(1_000)).build();
        go.await();
        while (System.nanoTime() < deadline && db.count("SELECT count(DISTINCT id) FROM published") < messages) {
          try {
            janitor.purgeSent();
          } catch (RuntimeException e) {
            failures.add(e);
          }
          Thread.sleep(20);
        }
        return null;
      }));
      go.countDown();
      for (Future<?> f : done) {
        f.get(120, TimeUnit.SECONDS);
      }
      threads.shutdown();
      assertThat(failures).as("runOnce or purgeSent threw").isEmpty();
      for (List<Integer> sequence : orderPerKey.values()) {
        assertThat(sequence).isSorted();
      }
    }
    assertThat(db.count("SELECT count(DISTINCT id) FROM published")).isEqualTo(messages);
    assertThat(db.count("SELECT count(*) FROM published")).as("publishes, duplicates included").isEqualTo(messages);
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status <> 'S'")).isZero();
  }
  /**
   * A pool in manual commit that checks a connection with a test query on borrow hands it out with
   * a transaction already begun, here at SERIALIZABLE: the batch's SET TRANSACTION is then not its
   * first statement. The relay and the purge must still work on it.
   */
  @Test
  void aPoolHandingOutConnectionsInATransactionStillRelaysAndPurges(TestDatabase db) throws Exception {
    db.execute("TRUNCATE published; TRUNCATE idem_outbox");
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(db.jdbcUrl());
    config.setAutoCommit(false);
    config.setConnectionTestQuery("SELECT 1");
    if (db.vendor() == TestDatabase.Vendor.MARIADB) {
      config.addDataSourceProperty("sessionVariables", "tx_isolation='SERIALIZABLE'");
    } else {
      config.addDataSourceProperty("options", "-c default_transaction_isolation=serializable");
    }
    config.setMaximumPoolSize(2);
    try (HikariDataSource pool = new HikariDataSource(config)) {
      Idem idem = Idem.builder(pool).build();
      idem.useTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of("orders", new byte[] {1})));
      Relay relay = idem.relay(m -> db.execute("INSERT INTO published VALUES ('" + m.id() + "', 'x')"))
          .retention(Duration.ofNanos(1_000)).build();
      Thread.sleep(700); // idle past HikariCP's 500 ms: the next borrow runs the test query
      assertThat(relay.runOnce()).isEqualTo(1);
      Thread.sleep(700);
      assertThat(relay.purgeSent()).isEqualTo(1);
    }
    assertThat(db.count("SELECT count(*) FROM published")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_outbox")).isZero();
  }
}
