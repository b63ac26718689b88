package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.VendorSql;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A storm of real connection kills covering phase 3 (the record after the provider answered): the
 * record fails for good and the caller is told so, and once the database answers again the key
 * answers within a second (completed with the provider's result, not in flight for the rest of
 * its 30 s lease), which a repeat replays without calling the provider again.
 */
@IdemTest(poolSize = 4, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class PhaseThreeStormTest {
  static final Duration STORM = Duration.ofSeconds(3);

  static ExecutorFixture f;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  /**
   * A pool of its own whose every connection handed out while the storm blows is killed by the
   * server first (PostgreSQL: pg_terminate_backend; MariaDB: KILL CONNECTION), from a connection of
   * the fixture's pool, and is gone from the server's session list before it is handed out.
   */
  static final class Storm extends DataSourceWrapper {
    final HikariDataSource pool;
    final boolean maria;
    volatile boolean blowing;
    final AtomicInteger kills = new AtomicInteger();

    Storm(HikariDataSource pool, boolean maria) {
      this.pool = pool;
      this.maria = maria;
    }

    @Override
    public Connection getConnection() throws SQLException {
      Connection c = pool.getConnection();
      if (blowing) {
        kill(c);
      }
      return c;
    }

    private void kill(Connection victim) throws SQLException {
      long id;
      try (Statement st = victim.createStatement();
          ResultSet rs = st.executeQuery(maria ? "SELECT CONNECTION_ID()" : "SELECT pg_backend_pid()")) {
        rs.next();
        id = rs.getLong(1);
      } catch (SQLException dead) {
        return; // killed already, and handed out again: it fails as it is
      }
      try (Connection killer = f.ds.getConnection(); Statement st = killer.createStatement()) {
        st.execute(maria ? "KILL CONNECTION " + id : "SELECT pg_terminate_backend(" + id + ")");
        try (PreparedStatement gone = killer.prepareStatement(maria
            ? "SELECT count(*) FROM information_schema.processlist WHERE id = ?"
            : "SELECT count(*) FROM pg_stat_activity WHERE pid = ?")) {
          gone.setLong(1, id);
          for (int i = 0; i < 1000; i++) {
            try (ResultSet rs = gone.executeQuery()) {
              rs.next();
              if (rs.getLong(1) == 0) {
                break;
              }
            }
            Thread.sleep(2);
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      kills.incrementAndGet();
    }
  }

  /** Whether {@code key}'s row answers: completed, or its lease over (a repeat takes over at once). */
  static boolean answers(IdempotencyKey key) {
    return f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = ? AND k.key = ? AND (k.state = 'C' OR"
        + " k.lease_expires_at <= " + f.clock() + ")", key.scope(), key.value()) == 1;
  }

  @Test
  void afterAStormOfKillsThroughPhaseThreeTheKeyAnswersWithinASecondOfTheDatabasesReturn() throws Exception {
    try (HikariDataSource pool = f.db.dataSource(4)) {
      Storm storm = new Storm(pool, VendorSql.maria(f.db));
      IdempotentExecutor executor = Idem.builder(storm).build().executor().lease(Duration.ofSeconds(30)).build();
      IdempotencyKey key = IdempotencyKey.of("storm", UUID.randomUUID().toString());
      String callKey = Keys.child(key, "external").value();
      long[] stormStarts = new long[1];
      long[] stormEnds = new long[1];
      CountDownLatch gaveUp = new CountDownLatch(1);
      // The storm blows at least STORM, and until phase 3 gave up: it covers the whole of phase 3.
      Thread calm = new Thread(() -> {
        try {
          Thread.sleep(STORM.toMillis());
          gaveUp.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        stormEnds[0] = System.nanoTime();
        storm.blowing = false; // the database answers again
      });
      calm.setDaemon(true);
      String[] charge = new String[1];

      try {
        assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
          charge[0] = Provider.charge(f.ds, attempt.callKey().value(), 40); // the provider answered
          storm.blowing = true; // and the storm begins, before phase 3
          stormStarts[0] = System.nanoTime();
          calm.start();
          return charge[0];
        })).as("the record failed for good during the storm").isInstanceOf(DataAccessException.class);
      } finally {
        gaveUp.countDown();
      }
      calm.join();
      // the bound counts from the database's return, not from here
      Duration left = Duration.ofSeconds(1).minusNanos(System.nanoTime() - stormEnds[0]);
      Poll.until("the key answering within 1 s of the database's return", left, () -> answers(key));
      long blew = (stormEnds[0] - stormStarts[0]) / 1_000_000;
      System.out.printf("storm: %d kills over %d ms; the key answered %d ms after the database's return%n",
          storm.kills.get(), blew, (System.nanoTime() - stormEnds[0]) / 1_000_000);

      assertThat(storm.kills.get()).as("the storm killed connections").isGreaterThan(1);
      assertThat(f.column(key, "state")).as("recorded in the background with the provider's answer").isEqualTo("C");
      assertThat(f.column(key, f.resultText())).isEqualTo(charge[0]);
      assertThat(f.column(key, "fence")).isEqualTo("1");
      Execution<String> repeat = executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(),
          attempt -> Provider.charge(f.ds, attempt.callKey().value(), 40));
      assertThat(repeat.replayed()).isTrue();
      assertThat(repeat.value()).isEqualTo(charge[0]);
      assertThat(f.count("SELECT calls FROM provider_charges WHERE call_key = ?", callKey)).as("one provider call").isEqualTo(1);
    }
  }
}
