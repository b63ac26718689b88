package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * (MariaDB: the claim bounds innodb_lock_wait_timeout, whole seconds, for its own statement only,
 * SET STATEMENT .. FOR, so the session's own value, the caller's, is never changed; and a pool's
 * max_statement_time stands for statement_timeout.)
 *
 * <p>A callback's claim is one statement that bounds lock_timeout for its own wait and puts the
 * caller's back in the same statement, or, when it inserted nothing, in the read of the key's row
 * that follows it. Read back from the server: the bound is in force while the claim waits, the
 * caller's value is back whenever the caller's code runs after a claim (new key, a wait that ended
 * in a claim, a wait that ended in a replay, a repeat of a completed key, a re-claim past the
 * window), and a pool statement_timeout shorter than the wait ends the claim as in flight, never
 * as an error. An effect given as statements is claimed the same way, with its statements in the
 * same round trip, and waits its full bound under a pool statement_timeout.
 */
@IdemTest(poolSize = 4, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ClaimStatementTest {
  /** The pool's lock_timeout: the caller's, which no claim may leave changed (MariaDB: innodb_lock_wait_timeout, seconds). */
  static String CALLERS;
  static ExecutorFixture f;
  static HikariDataSource callers;
  static Idem idem;
  static final ExecutorService pool = Executors.newCachedThreadPool();

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    CALLERS = f.maria() ? "7" : "7654ms";
    callers = f.db.dataSourceWithDriverParams(6, f.maria() ? "sessionVariables=innodb_lock_wait_timeout=" + CALLERS
        : "options=-c%20lock_timeout%3D" + CALLERS);
    idem = Idem.builder(callers).build();
  }

  @AfterAll
  static void stop() {
    pool.shutdownNow();
  }

  static String lockTimeout(Connection c) throws SQLException {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery(f.maria() ? "SELECT @@session.innodb_lock_wait_timeout" : "SHOW lock_timeout")) {
      rs.next();
      return rs.getString(1);
    }
  }

  /** The effect: records the lock_timeout it runs under, and pays. */
  static String payUnder(Tx tx, String request, String[] seen) throws SQLException {
    seen[0] = lockTimeout(tx.connection());
    return ExecutorFixture.pay(tx, request, 1);
  }

  @Test
  void theCallersLockTimeoutIsInForceForANewKeysEffect() throws Exception {
    String request = "new-" + UUID.randomUUID();
    String[] seen = new String[1];
    IdempotentExecutor executor = idem.executor().inFlightWait(Duration.ofMillis(300)).build();
    assertThat(executor.execute(IdempotencyKey.of("claim", request), Fingerprint.EMPTY, Codec.utf8(),
        tx -> payUnder(tx, request, seen)).applied()).isTrue();
    assertThat(seen[0]).isEqualTo(CALLERS);
    String[] inbox = new String[1];
    assertThat(idem.inbox("claim").build().receive(request, tx -> {
      inbox[0] = lockTimeout(tx.connection());
    }).applied()).isTrue();
    assertThat(inbox[0]).isEqualTo(CALLERS);
  }

  /**
   * The bound is set before the insert waits: under the caller's 7.6 s a copy behind a first copy
   * still running is answered in flight after its 300 ms, given as a callback or as statements
   * (whose claim goes alone, the session having no statement_timeout), having written nothing.
   */
  @Test
  void theBoundIsInForceWhileTheClaimWaits() throws Exception {
    String request = "bound-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().inFlightWait(Duration.ofMillis(300)).build();
    Inbox inbox = idem.inbox("bound").inFlightWait(Duration.ofMillis(300)).build();
    org.jooq.Query pay = DSL.query("INSERT INTO payments (request, amount) VALUES (?, 1)", request);
    try (Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      ExecutorFixture.hold(holder, executor, inbox, key, request);
      long started = System.nanoTime();
      assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
      assertThat(inbox.receive(request, tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
      // two bounded waits, far from the caller's 7.6 s each (MariaDB: two whole seconds, far from 2 x 7 s)
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(f.maria() ? 5 : 3));
      started = System.nanoTime();
      assertThat(executor.execute(key, Fingerprint.EMPTY, pay).inFlight()).isTrue();
      assertThat(inbox.receive(request, pay).inFlight()).isTrue();
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isBetween(Duration.ofMillis(600), Duration.ofSeconds(5));
      holder.rollback();
    }
    assertThat(f.payments(request)).isZero();
  }

  /** A copy that waited for a first copy which then rolled back claims the key: its effect runs under the caller's value. */
  @Test
  void aClaimThatWaitedAndThenClaimedPutsTheCallersValueBackForTheEffect() throws Exception {
    String request = "waited-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().inFlightWait(Duration.ofSeconds(5)).build();
    String[] seen = new String[1];
    Future<Execution<String>> copy;
    try (Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      executor.execute(holder, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
      copy = pool.submit(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> payUnder(tx, request, seen)));
      LockWaits.await(f.db, 1); // the copy's claim behind the holder's
      holder.rollback();
    }
    assertThat(copy.get(10, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(seen[0]).isEqualTo(CALLERS);
    assertThat(f.payments(request)).isEqualTo(1);
  }

  /**
   * A joined copy that waited for a first copy which then committed: its claim inserts nothing, and
   * the row is read next, in a statement of its own that sees the first copy's commit; the
   * caller's transaction goes on under the caller's value.
   */
  @Test
  void aJoinedClaimThatWaitedAndFoundNothingPutsTheCallersValueBack() throws Exception {
    String request = "joined-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().inFlightWait(Duration.ofSeconds(5)).build();
    CountDownLatch claimed = new CountDownLatch(1);
    Future<Execution<String>> first = pool.submit(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      String id = ExecutorFixture.pay(tx, request, 1);
      claimed.countDown();
      LockWaits.await(f.db, 1); // commits once the joined copy waits on it
      return id;
    }));
    assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
    try (Connection caller = callers.getConnection()) {
      caller.setAutoCommit(false);
      Execution<String> copy = executor.execute(caller, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
      assertThat(copy.replayed()).isTrue();
      assertThat(lockTimeout(caller)).isEqualTo(CALLERS);
      caller.commit();
    }
    assertThat(first.get(10, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(f.payments(request)).isEqualTo(1);
  }

  /**
   * A repeat of a completed key, joined to the caller's transaction (which always claims first):
   * the claim inserts nothing, the read after it answers the replay, and the caller's transaction
   * goes on under the caller's value; the executor's and the inbox's.
   */
  @Test
  void aJoinedRepeatOfACompletedKeyPutsTheCallersValueBack() throws Exception {
    String request = "joined-repeat-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().build();
    Inbox inbox = idem.inbox("joined-repeat").build();
    assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).applied()).isTrue();
    assertThat(inbox.receive(request, tx -> ExecutorFixture.pay(tx, request, 1)).applied()).isTrue();
    try (Connection caller = callers.getConnection()) {
      caller.setAutoCommit(false);
      Execution<String> copy = executor.execute(caller, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
      assertThat(copy.replayed()).isTrue();
      assertThat(((Execution.Replayed<String>) copy).value()).startsWith("payment-");
      assertThat(lockTimeout(caller)).isEqualTo(CALLERS);
      assertThat(inbox.receive(caller, request, tx -> ExecutorFixture.pay(tx, request, 1)).replayed()).isTrue();
      assertThat(lockTimeout(caller)).isEqualTo(CALLERS);
      caller.commit();
    }
    assertThat(f.payments(request)).isEqualTo(2); // the executor's and the inbox's first copies
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  /** A key past its window is re-claimed by one statement too: its effect runs under the caller's value. */
  @Test
  void aReclaimPastTheWindowPutsTheCallersValueBack() throws Exception {
    String request = "reclaim-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().window(DedupeWindow.of(Duration.ofSeconds(1))).build();
    assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).applied()).isTrue();
    f.awaitPastWindow(key);
    String[] seen = new String[1];
    assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> payUnder(tx, request, seen)).applied()).isTrue();
    assertThat(seen[0]).isEqualTo(CALLERS);
    assertThat(f.payments(request)).isEqualTo(2);
  }

  /**
   * A pool statement_timeout (300 ms) shorter than the in-flight wait (1.5 s) ends the claim
   * statement (57014): a joined copy is answered in flight, its savepoint rolled back, and the
   * caller's transaction stays usable and commits its own work.
   */
  @Test
  void aStatementTimeoutShorterThanTheWaitEndsAJoinedClaimInFlight() throws Exception {
    String request = "joined-timeout-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    try (ExecutorFixture.TimedGuards timed = f.underShortStatementTimeout(2, "joined-timeout")) {
      IdempotentExecutor executor = timed.executor();
      Inbox inbox = timed.inbox();
      try (Connection holder = f.ds.getConnection(); Connection caller = timed.pool().getConnection()) {
        holder.setAutoCommit(false);
        ExecutorFixture.hold(holder, executor, inbox, key, request);
        caller.setAutoCommit(false);
        try (Statement st = caller.createStatement()) {
          st.execute("INSERT INTO payments (request, amount) VALUES ('" + request + "-caller', 1)");
        }
        assertThat(executor.execute(caller, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
        assertThat(inbox.receive(caller, request, tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
        caller.commit();
        holder.commit();
      }
    }
    assertThat(f.payments(request)).isEqualTo(2); // the holder's two effects, nothing of the copies
    assertThat(f.payments(request + "-caller")).isEqualTo(1);
  }

  /**
   * An effect given as statements, in a session whose statement_timeout is off, sends its claim
   * alone before them, and the statements run under the caller's lock_timeout; a repeat is
   * replayed without them.
   */
  @Test
  void aStatementsClaimPutsTheCallersLockTimeoutBack() throws Exception {
    String request = "statements-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("claim", request);
    IdempotentExecutor executor = idem.executor().build();
    Inbox inbox = idem.inbox("statements").build();
    // pays only under the caller's lock_timeout
    org.jooq.Query payUnderCallers = DSL.query("INSERT INTO payments (request, amount) SELECT ?, 1"
        + " WHERE " + (f.maria() ? "@@session.innodb_lock_wait_timeout" : "current_setting('lock_timeout')") + " = '"
        + CALLERS + "'", request);
    assertThat(executor.execute(key, Fingerprint.EMPTY, payUnderCallers).applied()).isTrue();
    assertThat(inbox.receive(request, payUnderCallers).applied()).isTrue();
    assertThat(f.payments(request)).isEqualTo(2);
    assertThat(executor.execute(key, Fingerprint.EMPTY, payUnderCallers).replayed()).isTrue();
    assertThat(inbox.receive(request, payUnderCallers).replayed()).isTrue();
    assertThat(f.payments(request)).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  /**
   * Under a pool statement_timeout (300 ms) shorter than the in-flight wait (1.5 s), an effect
   * given as statements turns the timeout off for its claim in a statement before it (the guard
   * learns this at its first claim, which stops before it writes): owned or joined, a copy behind a
   * first copy in flight waits the full 1.5 s and is answered in flight. The caller's timeout is
   * back for the statements: one of them that outlasts it fails with 57014, and nothing of it
   * commits.
   */
  @Test
  void aStatementsClaimUnderAShortStatementTimeoutWaitsItsFullBound() throws Exception {
    String request = "statements-timeout-" + UUID.randomUUID();
    org.jooq.Query pay = DSL.query("INSERT INTO payments (request, amount) VALUES (?, 1)", request);
    try (ExecutorFixture.TimedGuards timed = f.underShortStatementTimeout(2, "statements-timeout");
        Connection holder = f.ds.getConnection()) {
      IdempotencyKey key = IdempotencyKey.of("claim", request);
      holder.setAutoCommit(false);
      ExecutorFixture.hold(holder, timed.executor(), timed.inbox(), key, request);
      long started = System.nanoTime();
      assertThat(timed.executor().execute(key, Fingerprint.EMPTY, pay).inFlight()).isTrue();
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isGreaterThanOrEqualTo(Duration.ofMillis(1400));
      started = System.nanoTime();
      assertThat(timed.inbox().receive(request, pay).inFlight()).isTrue();
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isGreaterThanOrEqualTo(Duration.ofMillis(1400));
      try (Connection caller = timed.pool().getConnection()) {
        caller.setAutoCommit(false);
        started = System.nanoTime();
        assertThat(timed.executor().execute(caller, key, Fingerprint.EMPTY, pay).inFlight()).isTrue();
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isGreaterThanOrEqualTo(Duration.ofMillis(1400));
        caller.commit();
      }
      holder.commit();
      // PostgreSQL only: MariaDB's own slow statements (SLEEP, BENCHMARK) end early at
      // max_statement_time without an error, so none outlasts it with one. The claim's part is above.
      if (!f.maria()) {
        String slow = request + "-slow";
        assertThatThrownBy(() -> timed.executor().execute(IdempotencyKey.of("claim", slow), Fingerprint.EMPTY,
            DSL.query("SELECT pg_sleep(1)"), DSL.query("INSERT INTO payments (request, amount) VALUES (?, 1)", slow)))
            .satisfies(e -> assertThat(dev.idem.jdbc.internal.SqlStates.of(e)).isEqualTo("57014"));
        assertThat(f.payments(slow)).isZero();
        assertThat(f.keyRows(IdempotencyKey.of("claim", slow))).isZero();
      }
    }
    assertThat(f.payments(request)).isEqualTo(2); // the holder's two effects, nothing of the copies
  }
}
