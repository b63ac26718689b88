package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.notify.Delivery;
import dev.idem.jdbc.notify.Notification;
import dev.idem.jdbc.notify.Notifications;
import dev.idem.jdbc.notify.SendResult;
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
    /** Connections still handed out whole before the storm begins by itself; negative: never. */
    final AtomicInteger spare = new AtomicInteger(-1);
    final AtomicInteger kills = new AtomicInteger();

    Storm(HikariDataSource pool, boolean maria) {
      this.pool = pool;
      this.maria = maria;
    }

    @Override
    public Connection getConnection() throws SQLException {
      Connection c = pool.getConnection();
      if (!blowing && spare.get() >= 0 && spare.getAndDecrement() == 0) {
        blowing = true;
      }
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
    String[] charge = new String[1];
    AtomicInteger calls = new AtomicInteger();
    IdempotencyKey key = stormThroughPhaseThree(Codec.utf8(), calls, charge, false);
    assertThat(f.column(key, f.resultText())).isEqualTo(charge[0]);
  }

  /**
   * A codec that stores nothing records a null result: the background must record it (complete
   * the key), not read the null as "end the lease", or the repeat calls the provider again.
   */
  @Test
  void aCallWhoseCodecStoresNothingIsRecordedInTheBackgroundNotReleased() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    IdempotencyKey key = stormThroughPhaseThree(Codec.none(), calls, new String[1], false);
    assertThat(f.column(key, f.resultText())).as("nothing stored").isNull();
  }

  /** The same for a call that returned null under a codec that stores results. */
  @Test
  void aCallThatReturnedNullIsRecordedInTheBackgroundNotReleased() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    IdempotencyKey key = stormThroughPhaseThree(Codec.utf8(), calls, new String[1], true);
    assertThat(f.column(key, f.resultText())).as("a null result").isNull();
  }

  /**
   * Runs one call through a storm that begins after the provider answered and lasts until phase 3
   * gave up; asserts the key completes in the background within a second of the database's return
   * under fence 1, and that a repeat replays without calling the provider (counted in {@code
   * calls} and in the provider's table).
   */
  private static IdempotencyKey stormThroughPhaseThree(Codec<String> codec, AtomicInteger calls, String[] charge,
      boolean returnNull) throws Exception {
    return stormThroughPhaseThree(codec, calls, charge, returnNull, null, null);
  }

  /**
   * As above, on a pool at {@code isolation} (null: the driver's), the storm ended by {@code
   * calming} (null: at once), given the storm and the key.
   */
  private static IdempotencyKey stormThroughPhaseThree(Codec<String> codec, AtomicInteger calls, String[] charge,
      boolean returnNull, String isolation, Calming calming) throws Exception {
    try (HikariDataSource pool = isolation == null ? f.db.dataSource(4) : f.db.dataSource(4, isolation)) {
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
        if (calming == null) {
          storm.blowing = false; // the database answers again
        } else {
          try {
            calming.calm(storm, key);
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        }
      });
      calm.setDaemon(true);

      try {
        assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, codec, attempt -> {
          calls.incrementAndGet();
          charge[0] = Provider.charge(f.ds, attempt.callKey().value(), 40); // the provider answered
          storm.blowing = true; // and the storm begins, before phase 3
          stormStarts[0] = System.nanoTime();
          calm.start();
          return returnNull ? null : charge[0];
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
      assertThat(f.column(key, "fence")).isEqualTo("1");
      Execution<String> repeat = executor.executeExternal(key, Fingerprint.EMPTY, codec, attempt -> {
        calls.incrementAndGet();
        return Provider.charge(f.ds, attempt.callKey().value(), 40);
      });
      assertThat(repeat.replayed()).isTrue();
      if (codec == Codec.<String>utf8() && !returnNull) {
        assertThat(repeat.value()).isEqualTo(charge[0]);
      }
      assertThat(calls.get()).as("the call ran once in all").isEqualTo(1);
      assertThat(f.count("SELECT calls FROM provider_charges WHERE call_key = ?", callKey)).as("one provider call").isEqualTo(1);
      return key;
    }
  }

  /** How a test ends the storm. */
  interface Calming {
    void calm(Storm storm, IdempotencyKey key) throws Exception;
  }

  /**
   * At REPEATABLE READ the background's record, its first try after the outage, waits on a row
   * lock of a write that changes nothing and then commits: PostgreSQL refuses the record with 40001
   * (the row changed under its snapshot), with the row still in flight under the attempt's token.
   * The background looks at the row again and records it, rather than reading the refusal as "the
   * row moved on" and dropping the record (MariaDB's InnoDB answers such a write without 40001: the
   * test runs there as a plain storm, which proves nothing about 40001).
   */
  @Test
  void aSerializationFailureInTheBackgroundDoesNotDropTheRecord() throws Exception {
    String[] charge = new String[1];
    AtomicInteger calls = new AtomicInteger();
    boolean maria = VendorSql.maria(f.db);
    IdempotencyKey key = stormThroughPhaseThree(Codec.utf8(), calls, charge, false, "TRANSACTION_REPEATABLE_READ",
        (storm, k) -> {
          if (maria) {
            storm.blowing = false; // no 40001 to provoke there (and no lock wait seen in time): a plain storm
            return;
          }
          try (Connection blocker = f.ds.getConnection()) {
            blocker.setAutoCommit(false);
            try (PreparedStatement lock = blocker.prepareStatement(
                "UPDATE idem_keys SET fence = fence WHERE scope = ? AND idem_keys.key = ?")) {
              lock.setString(1, k.scope());
              lock.setString(2, k.value());
              assertThat(lock.executeUpdate()).isEqualTo(1);
            }
            storm.blowing = false; // the database answers again, and the record waits on the lock
            Poll.until("the background's record waiting on the row lock", Duration.ofSeconds(5),
                () -> f.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") >= 1);
            blocker.commit();
          }
        });
    assertThat(f.column(key, f.resultText())).isEqualTo(charge[0]);
  }

  /**
   * At most once, "sent" is recorded before the send. If that record fails for good on dead
   * connections, nothing is sent and the sender is told so: the record must not be made later in
   * the background (a redelivery would be answered Duplicate and the message never sent), the
   * lease is ended instead, so once the database answers a redelivery sends.
   */
  @Test
  void atMostOnceARecordBeforeTheSendThatFailsIsNotMadeLaterTheRedeliverySends() throws Exception {
    try (HikariDataSource pool = f.db.dataSource(4)) {
      Storm storm = new Storm(pool, VendorSql.maria(f.db));
      Notifications digests = Idem.builder(storm).build().notifications("storm-digest")
          .delivery(Delivery.AT_MOST_ONCE_MAY_LOSE).build();
      Notification n = new Notification(UUID.randomUUID().toString(), "email", "someone@example.com");
      AtomicInteger sent = new AtomicInteger();
      storm.spare.set(1); // the claim's connection is whole; the record's and every later one killed
      assertThatThrownBy(() -> digests.send(n, out -> sent.incrementAndGet()))
          .as("the record before the send failed for good").isInstanceOf(DataAccessException.class);
      assertThat(sent.get()).as("nothing sent").isZero();
      Thread.sleep(500); // the background tries while the storm blows
      storm.blowing = false; // the database answers again
      String row = "SELECT count(*) FROM idem_keys k WHERE k.scope = 'notify/email' AND k.key = ?";
      Poll.until("the lease ended in the background", Duration.ofSeconds(5), () -> f.count(row + " AND k.state = 'I'"
          + " AND k.fence = 1 AND k.lease_expires_at <= " + f.clock(), n.id()) == 1);
      Thread.sleep(300); // and nothing recorded after it
      assertThat(f.count(row + " AND k.state = 'C'", n.id())).as("never recorded sent").isZero();

      SendResult redelivered = digests.send(n, out -> sent.incrementAndGet());
      assertThat(redelivered).isInstanceOf(SendResult.Sent.class);
      assertThat(sent.get()).as("sent once in all").isEqualTo(1);
      assertThat(f.count(row + " AND k.state = 'C' AND k.fence = 2", n.id())).isEqualTo(1);
      assertThat(storm.kills.get()).as("the storm killed connections").isGreaterThan(1);
    }
  }
}
