package dev.idem.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.PoolOfOne;
import dev.idem.key.IdempotencyKey;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.Race;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Leases and fencing tokens on a real PostgreSQL or MariaDB; expiry is waited for on the database clock. */
@IdemTest(poolSize = 8,
    sql = "CREATE TABLE report_runs (resource text NOT NULL, written_by text NOT NULL, token bigint NOT NULL)")
class LeasesTest {
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration SHORT = Duration.ofSeconds(1);

  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static Leases leases;
  static final RecordingListener events = new RecordingListener();

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    idem = Idem.builder(ds).listener(events).build();
    leases = idem.leases();
  }

  static String query(String sql, String resource) throws SQLException {
    try (Connection c = ds.getConnection(); var ps = c.prepareStatement(sql)) {
      ps.setString(1, resource);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : "none";
      }
    }
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /** Now by the database clock, as idem reads it: MariaDB's times are UTC DATETIMEs. */
  static String now() {
    return mariadb() ? "utc_timestamp(6)" : "clock_timestamp()";
  }

  /** The lease's end as text, to see whether a call moved it. */
  static String expiresAtText(String resource) throws SQLException {
    return query("SELECT " + (mariadb() ? "CAST(expires_at AS CHAR)" : "expires_at::text") + " FROM idem_leases WHERE resource = ?", resource);
  }

  /**
   * A grant inside a transaction on the same pool takes a second connection: on a pool that has
   * none to give, the acquire fails after the pool's timeout saying so, and no lease is granted.
   */
  @Test
  void aGrantInsideATransactionOnAnExhaustedPoolFailsSayingWhyAndGrantsNothing() throws SQLException {
    String resource = "exhausted-" + UUID.randomUUID();
    try (HikariDataSource one = PoolOfOne.of(db)) {
      Idem onOne = Idem.builder(one).build();
      assertThatThrownBy(() -> onOne.inTransaction(tx -> onOne.leases().acquire(resource, "worker-a", LONG)))
          .isInstanceOf(DataAccessException.class)
          .hasMessageContaining("Connection is not available")
          .hasMessageContaining("needs a second connection while the transaction holds the first");
    }
    assertThat(query("SELECT count(*) FROM idem_leases WHERE resource = ?", resource)).isEqualTo("0");
  }

  /** The lease row: "holder token", or "none". */
  static String leaseRow(String resource) throws SQLException {
    return query("SELECT concat(coalesce(holder, '-'), ' ', token) FROM idem_leases WHERE resource = ?", resource);
  }

  /** The writes on {@code resource}, "written_by:token" joined by commas in token order. */
  static String writesInOrder(String resource) throws SQLException {
    return query(mariadb()
        ? "SELECT group_concat(concat(written_by, ':', token) ORDER BY token SEPARATOR ',') FROM report_runs WHERE resource = ?"
        : "SELECT string_agg(written_by || ':' || token, ',' ORDER BY token) FROM report_runs WHERE resource = ?", resource);
  }

  static long writes(String resource) throws SQLException {
    return Long.parseLong(query("SELECT count(*) FROM report_runs WHERE resource = ?", resource));
  }

  /** Waits until the database clock is past the lease's end; never trusts the JVM clock. */
  static void awaitExpiryOnDatabaseClock(String resource) throws Exception {
    Poll.until("the lease on " + resource + " over on the database clock",
        () -> db.count("SELECT count(*) FROM idem_leases WHERE resource = ? AND expires_at <= " + now(), resource) == 1);
  }

  static void write(Lease lease) throws SQLException {
    lease.fenced(tx -> {
      try (var ps = tx.connection().prepareStatement("INSERT INTO report_runs VALUES (?, ?, ?)")) {
        ps.setString(1, lease.resource());
        ps.setString(2, lease.holder());
        ps.setLong(3, lease.token().value());
        return ps.executeUpdate();
      }
    });
  }

  @Test
  void bTakesOverAfterAsLeaseEndsAndAsStaleWriteIsRefused() throws Exception {
    String job = "nightly-report";
    // Two seconds, so that B's first try surely falls inside A's lease even on a loaded machine.
    Lease a = leases.acquire(job, "worker-a", Duration.ofSeconds(2)).orElseThrow();
    assertThat(a.token()).isEqualTo(FencingToken.FIRST);
    assertThat(a.tookOver()).isFalse();
    // While A's lease lasts, B is refused and the row is untouched.
    assertThat(leases.acquire(job, "worker-b", LONG)).isEmpty();
    assertThat(leaseRow(job)).isEqualTo("worker-a 1");
    write(a);
    assertThat(writes(job)).isEqualTo(1);

    // A pauses (a GC, a slow call) past its lease; B is granted the job with a higher token.
    awaitExpiryOnDatabaseClock(job);
    Lease b = leases.acquire(job, "worker-b", LONG).orElseThrow();
    assertThat(b.token().value()).isEqualTo(2);
    assertThat(b.tookOver()).isTrue();
    assertThat(b.previousHolder()).contains("worker-a");
    assertThat(leaseRow(job)).isEqualTo("worker-b 2");
    assertThat(events.of(IdemEvent.LeaseTakenOver.class).stream().filter(e -> e.key().value().equals(job))).containsExactly(
        new IdemEvent.LeaseTakenOver("leases", IdempotencyKey.of("lease", job), 1, 2));

    // A wakes up: its write with token 1 is refused and leaves nothing; renew and release fail.
    assertThatThrownBy(() -> write(a)).isInstanceOfSatisfying(StaleFenceException.class, e -> {
      assertThat(e.token()).isEqualTo(1);
      assertThat(e.highest()).isEqualTo(2);
      assertThat(e.resource()).isEqualTo(job);
    });
    assertThat(writes(job)).isEqualTo(1);
    assertThat(events.of(IdemEvent.StaleFence.class).stream().filter(e -> e.resource().equals(job)))
        .containsExactly(new IdemEvent.StaleFence("leases", job, 1, 2));
    assertThat(a.renew(LONG)).isFalse();
    assertThat(a.release()).isFalse();
    assertThat(leaseRow(job)).isEqualTo("worker-b 2");

    write(b);
    assertThat(writesInOrder(job)).isEqualTo("worker-a:1,worker-b:2");
  }

  @Test
  void aFencedWriteInTheCallersOwnTransactionIsRefusedWhenStale() throws Exception {
    String job = "caller-tx";
    Lease a = leases.acquire(job, "worker-a", SHORT).orElseThrow();
    awaitExpiryOnDatabaseClock(job);
    Lease b = leases.acquire(job, "worker-b", LONG).orElseThrow();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      List<String> ran = new ArrayList<>();
      assertThatThrownBy(() -> a.fenced(c, tx -> ran.add("a")))
          .isInstanceOfSatisfying(StaleFenceException.class, e -> assertThat(e.highest()).isEqualTo(2));
      assertThat(ran).isEmpty();
      c.rollback();
      b.fenced(c, tx -> {
        assertThat(tx.connection()).isSameAs(c);
        try (var ps = c.prepareStatement("INSERT INTO report_runs VALUES (?, 'worker-b', 2)")) {
          ps.setString(1, job);
          return ps.executeUpdate();
        }
      });
      c.commit();
    }
    assertThat(writesInOrder(job)).isEqualTo("worker-b:2");
  }

  @Test
  void tokensStrictlyGrowAcrossHoldersAndTheRowSurvivesRelease() throws SQLException {
    String resource = "partition-7";
    List<Long> tokens = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      Lease l = leases.acquire(resource, "holder-" + i, LONG).orElseThrow();
      tokens.add(l.token().value());
      assertThat(l.tookOver()).isFalse(); // released, not taken over
      assertThat(l.release()).isTrue();
      assertThat(leaseRow(resource)).isEqualTo("- " + (i + 1));
    }
    assertThat(tokens).containsExactly(1L, 2L, 3L, 4L, 5L);
    assertThat(query("SELECT count(*) FROM idem_leases WHERE resource = ?", resource)).isEqualTo("1");
    assertThat(events.of(IdemEvent.LeaseTakenOver.class)).noneMatch(e -> e.key().value().equals(resource));
  }

  @Test
  void onlyTheHolderRenewsAndOnlyWhileTheLeaseLasts() throws Exception {
    String resource = "renewals";
    Lease a = leases.acquire(resource, "worker-a", Duration.ofSeconds(30)).orElseThrow();
    Instant firstEnd = a.expiresAt();
    String before = expiresAtText(resource);
    // Someone else, even with the right token, cannot extend it.
    assertThat(leases.renew(resource, "mallory", a.token(), LONG)).isFalse();
    assertThat(leases.renew(resource, "worker-a", a.token().next(), LONG)).isFalse();
    assertThat(expiresAtText(resource)).isEqualTo(before);
    // The holder can, and the database's end time moves.
    assertThat(a.renew(LONG)).isTrue();
    assertThat(a.expiresAt()).isAfter(firstEnd);
    assertThat(db.count("SELECT count(*) FROM idem_leases WHERE resource = ? AND expires_at > " + now()
        + (mariadb() ? " + interval 4 minute" : " + interval '4 minutes'"), resource)).isEqualTo(1);
    assertThat(leaseRow(resource)).isEqualTo("worker-a 1");

    // Once it ended, it cannot be renewed even with no one else around: acquire again, new token.
    Lease b = leases.acquire("renewals-lapsed", "worker-a", SHORT).orElseThrow();
    awaitExpiryOnDatabaseClock("renewals-lapsed");
    assertThat(b.renew(LONG)).isFalse();
    Lease again = leases.acquire("renewals-lapsed", "worker-a", LONG).orElseThrow();
    assertThat(again.token().value()).isEqualTo(2);
  }

  @Test
  void copiesRacingForAFreeResourceGetOneGrant() throws Exception {
    int racers = 6;
    List<Optional<Lease>> grants = Race.together(racers, i -> leases.acquire("contended", "racer-" + i, LONG));
    List<Lease> granted = grants.stream().flatMap(Optional::stream).toList();
    assertThat(granted).hasSize(1);
    assertThat(granted.get(0).token()).isEqualTo(FencingToken.FIRST);
    assertThat(leaseRow("contended")).isEqualTo(granted.get(0).holder() + " 1");
  }

  /**
   * On a pool at REPEATABLE READ or SERIALIZABLE, an acquire that waited for a competing grant which
   * then committed fails with 40001 inside idem (PostgreSQL; MariaDB's grants run at READ COMMITTED
   * whatever the pool's level); the caller must get what READ COMMITTED gives: no lease, never an
   * error. Then copies race on such a pool: one grant each round. At every isolation level, on
   * both databases (PostgreSQL runs READ UNCOMMITTED as READ COMMITTED).
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void underAnyIsolationALostRaceIsNoLeaseNotAnError(String isolation) throws Exception {
    String job = "strict-" + isolation;
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (HikariDataSource strictPool = db.dataSource(6, isolation); Connection other = ds.getConnection()) {
      Leases strict = Idem.builder(strictPool).build().leases();
      other.setAutoCommit(false);
      try (var ps = other.prepareStatement("INSERT INTO idem_leases (resource, holder, token, expires_at)"
          + " VALUES (?, 'worker-a', 1, " + now() + (mariadb() ? " + interval 5 minute)" : " + interval '5 minutes')"))) {
        ps.setString(1, job);
        ps.executeUpdate();
      }
      Future<Optional<Lease>> b = pool.submit(() -> strict.acquire(job, "worker-b", LONG));
      awaitBackendWaitingOnALock();
      other.commit();
      assertThat(b.get(30, TimeUnit.SECONDS)).isEmpty();
      assertThat(leaseRow(job)).isEqualTo("worker-a 1");

      for (int round = 0; round < 10; round++) {
        String raced = job + "-race-" + round;
        List<Optional<Lease>> grants = Race.together(6, i -> strict.acquire(raced, "racer-" + i, LONG));
        List<Lease> granted = grants.stream().flatMap(Optional::stream).toList();
        assertThat(granted).hasSize(1);
        assertThat(leaseRow(raced)).isEqualTo(granted.get(0).holder() + " 1");

        // and for a lease that ended: one takes it over, with the next token
        String ended = job + "-takeover-" + round;
        strict.acquire(ended, "first", Leases.MIN_TTL).orElseThrow();
        awaitExpiryOnDatabaseClock(ended);
        List<Lease> takers = Race.together(6, i -> strict.acquire(ended, "taker-" + i, LONG)).stream().flatMap(Optional::stream).toList();
        assertThat(takers).hasSize(1);
        assertThat(takers.get(0).token().value()).isEqualTo(2);
        assertThat(takers.get(0).previousHolder()).contains("first");
        assertThat(leaseRow(ended)).isEqualTo(takers.get(0).holder() + " 2");
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aFenceCheckHoldsOffATakeoverUntilTheWriteCommits() throws Exception {
    String job = "slow-writer";
    Lease a = leases.acquire(job, "worker-a", SHORT).orElseThrow();
    awaitExpiryOnDatabaseClock(job);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (Connection tx = ds.getConnection()) {
      tx.setAutoCommit(false);
      // A's lease ended but no one was granted since: A's token is still the latest and admitted.
      leases.checkFence(tx, job, a.token());
      Future<Optional<Lease>> b = pool.submit(() -> leases.acquire(job, "worker-b", LONG));
      awaitBackendWaitingOnALock();
      try (var ps = tx.prepareStatement("INSERT INTO report_runs VALUES (?, 'worker-a', 1)")) {
        ps.setString(1, job);
        ps.executeUpdate();
      }
      tx.commit();
      Lease granted = b.get(30, TimeUnit.SECONDS).orElseThrow();
      assertThat(granted.token().value()).isEqualTo(2);
    } finally {
      pool.shutdownNow();
    }
    assertThat(writes(job)).isEqualTo(1);
  }

  /** Waits until some backend waits on a row lock of idem_leases (B's grant, behind A's check). */
  static void awaitBackendWaitingOnALock() throws Exception {
    if (mariadb()) {
      // InnoDB's own record of the transactions waiting for a lock, in this test's database. It
      // refreshes that record only when it was not read for 0.1 s: read it more slowly than that.
      long deadline = System.nanoTime() + Poll.BOUND.toNanos();
      while (db.count("SELECT count(*) FROM information_schema.innodb_trx t JOIN information_schema.processlist p"
          + " ON p.id = t.trx_mysql_thread_id WHERE t.trx_state = 'LOCK WAIT' AND p.db = database()"
          + " AND t.trx_query LIKE '%idem_leases%'") == 0) {
        assertThat(System.nanoTime()).as("a session of " + db.name() + " waiting on a lock of idem_leases").isLessThan(deadline);
        Thread.sleep(150);
      }
      return;
    }
    LockWaits.await(db, 1, "%idem_leases%");
  }

  @Test
  void checkFenceRefusesWhatCannotProtectAWrite() throws SQLException {
    Lease l = leases.acquire("checked", "worker-a", LONG).orElseThrow();
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> leases.checkFence(c, "checked", l.token()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
      c.setAutoCommit(false);
      assertThatThrownBy(() -> leases.checkFence(c, "never-leased", l.token()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no lease was ever granted");
      c.rollback();
      assertThatThrownBy(() -> leases.checkFence(c, "checked", l.token().next()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("never granted");
      c.rollback();
      assertThatThrownBy(() -> leases.checkFence(c, "checked", null))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("token");
      leases.checkFence(c, "checked", l.token());
      c.rollback();
    }
  }

  @Test
  void badInputIsRefusedAndWritesNothing() throws SQLException {
    assertThatThrownBy(() -> leases.acquire(null, "h", LONG))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resource");
    assertThatThrownBy(() -> leases.acquire("bad resource", "h", LONG))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resource");
    assertThatThrownBy(() -> leases.acquire("bad-input", "", LONG))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("holder");
    assertThatThrownBy(() -> leases.acquire("bad-input", "h", null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThatThrownBy(() -> leases.acquire("bad-input", "h", Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThatThrownBy(() -> leases.acquire("bad-input", "h", Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThatThrownBy(() -> leases.acquire("bad-input", "h", Duration.ofDays(2)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThatThrownBy(() -> leases.acquire("bad-input", "h", Duration.ofNanos(10)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThat(leaseRow("bad-input")).isEqualTo("none");

    Lease l = leases.acquire("bad-renew", "h", LONG).orElseThrow();
    String before = expiresAtText("bad-renew");
    assertThatThrownBy(() -> l.renew(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    assertThatThrownBy(() -> leases.renew("bad-renew", "h", null, LONG))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("token");
    assertThat(expiresAtText("bad-renew")).isEqualTo(before);
  }

  @Test
  void aGrantCommitsOnItsOwnEvenInsideARolledBackTransaction() throws SQLException {
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      assertThat(leases.acquire("own-commit", "worker-a", LONG)).isPresent();
      throw new IllegalStateException("the caller's work failed");
    })).isInstanceOf(IllegalStateException.class);
    // The grant was seen by everyone and stays: a second holder is refused.
    assertThat(leaseRow("own-commit")).isEqualTo("worker-a 1");
    assertThat(leases.acquire("own-commit", "worker-b", LONG)).isEmpty();
  }

  /**
   * A holder frozen inside {@code fenced()} keeps the lease's row locked until its write commits.
   * Another worker's acquire waits for it at most {@link Leases#LOCK_WAIT}, then answers empty (the
   * resource is held); renew and release throw: no call waits without a bound, and nothing changes.
   */
  @Test
  void aHolderFrozenInsideFencedHoldsNoOneElseBeyondTheBound() throws Exception {
    String resource = "frozen-" + java.util.UUID.randomUUID();
    Lease held = leases.acquire(resource, "w1", LONG).orElseThrow();
    java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch thaw = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.ExecutorService holder = java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      java.util.concurrent.Future<?> frozen = holder.submit(() -> held.fenced(tx -> {
        inside.countDown();
        thaw.await(); // frozen: a GC pause, a stuck call
        return null;
      }));
      assertThat(inside.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
      long started = System.nanoTime();
      assertThat(leases.acquire(resource, "w2", LONG)).isEmpty();
      assertThatThrownBy(() -> leases.renew(resource, "w1", held.token(), LONG))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("locked");
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(20));
      thaw.countDown();
      frozen.get(10, java.util.concurrent.TimeUnit.SECONDS);
    } finally {
      thaw.countDown();
      holder.shutdownNow();
    }
    // nothing changed: w1 still holds the first grant
    assertThat(db.count("SELECT count(*) FROM idem_leases WHERE resource = ? AND holder = 'w1' AND token = ?",
        resource, held.token().value())).isEqualTo(1);
  }

}
