package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.PoolOfOne;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Defects of the engine before it was one, each read back from the database: a copy arriving
 * within the window while the first copy runs past it; a pool statement_timeout shorter than the
 * in-flight wait; an inbox copy waiting without bound; a cold repeat that leaves a dead tuple and
 * burns a transaction id; a DataSource that hands out the caller's open transaction.
 */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE,
    "CREATE TABLE charges (message_id text NOT NULL, amount int NOT NULL)"})
class EngineDefectsTest {
  static ExecutorFixture f;
  static final ExecutorService pool = Executors.newCachedThreadPool();
  static final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  @AfterAll
  static void stop() {
    pool.shutdownNow();
  }

  /** The five ways one key's effect can run: owned or joined, callback or statements, and the inbox. */
  enum Form { OWNED_CALLBACK, OWNED_STATEMENTS, JOINED_CALLBACK, JOINED_STATEMENTS, INBOX }

  /**
   * A 1 s window and a first copy whose effect runs past it: a second copy that arrives while it
   * runs, within the window, waits for it and must get the replay, never run the effect again (it
   * used to find the row past its window when the first committed, re-claim it and pay twice). The
   * first copy's effect goes on until the second waits on its key and the window is over by the
   * database clock.
   */
  @ParameterizedTest
  @EnumSource(Form.class)
  void aCopyArrivingWithinTheWindowNeverRunsAgainHoweverLongTheFirstRuns(Form form) throws Exception {
    String request = "window-" + form + "-" + UUID.randomUUID();
    IdempotentExecutor executor = f.idem.executor().window(DedupeWindow.of(Duration.ofSeconds(1)))
        .inFlightWait(Duration.ofSeconds(10)).build();
    Inbox inbox = f.idem.inbox("window").window(DedupeWindow.of(Duration.ofSeconds(1))).inFlightWait(Duration.ofSeconds(10)).build();
    IdempotencyKey key = IdempotencyKey.of("window", request);
    CountDownLatch firstClaimed = new CountDownLatch(1);
    Function<Boolean, Execution<?>> call = first -> {
      try {
        Codec<String> codec = Codec.utf8();
        return switch (form) {
          case OWNED_CALLBACK -> executor.execute(key, Fingerprint.EMPTY, codec, tx -> {
            String id = ExecutorFixture.pay(tx, request, 1);
            if (first) {
              firstClaimed.countDown();
              tx.dsl().execute(pastTheWindow());
            }
            return id;
          });
          case OWNED_STATEMENTS -> executor.execute(key, Fingerprint.EMPTY, slowPay(request, first, firstClaimed));
          case JOINED_CALLBACK -> f.idem.inTransaction(tx -> executor.execute(tx.connection(), key, Fingerprint.EMPTY, codec, t -> {
            String id = ExecutorFixture.pay(t, request, 1);
            if (first) {
              firstClaimed.countDown();
              t.dsl().execute(pastTheWindow());
            }
            return id;
          }));
          case JOINED_STATEMENTS -> f.idem.inTransaction(tx -> executor.execute(tx.connection(), key, Fingerprint.EMPTY,
              slowPay(request, first, firstClaimed)));
          case INBOX -> inbox.receive(request, tx -> {
            ExecutorFixture.pay(tx, request, 1);
            if (first) {
              firstClaimed.countDown();
              tx.dsl().execute(pastTheWindow());
            }
          });
        };
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    };
    Future<Execution<?>> first = pool.submit(() -> call.apply(true));
    if (form == Form.OWNED_STATEMENTS || form == Form.JOINED_STATEMENTS) {
      // the claim goes first in the string: once the hold runs, the first copy holds the key
      LockWaits.awaitHolding(f.db);
    } else {
      assertThat(firstClaimed.await(10, TimeUnit.SECONDS)).isTrue();
    }
    Execution<?> second = call.apply(false); // at once: within the window
    assertThat(first.get(20, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(second.replayed()).as("%s: the second copy's answer", form).isTrue();
    assertThat(f.payments(request)).as("%s: payment rows", form).isEqualTo(1);
  }

  /**
   * What the first copy's effect runs before it ends: on until the second copy waits on its key,
   * and past the 1 s window (from this statement's start, after the claim) by the database clock.
   */
  private static String pastTheWindow() {
    return LockWaits.hold(f.db, 1, Duration.ofMillis(1100));
  }

  /** A payment insert after {@link #pastTheWindow} (the first copy only), as statements the executor sends with its claim. */
  private static org.jooq.Query[] slowPay(String request, boolean first, CountDownLatch claimed) {
    claimed.countDown();
    org.jooq.Query pay = dsl.query("INSERT INTO payments (request, amount) VALUES (?, 1)", request);
    return first ? new org.jooq.Query[] {dsl.query(pastTheWindow()), pay} : new org.jooq.Query[] {pay};
  }

  /**
   * A pool whose statement_timeout (300 ms) is shorter than the in-flight wait (2 s): a copy that
   * waits on the first copy's key is answered in flight, never with the cancelled statement
   * (57014), and nothing of it commits.
   */
  @Test
  void aPoolStatementTimeoutShorterThanTheWaitIsInFlightNotAnError() throws Exception {
    String request = "timeout-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("timeout", request);
    try (ExecutorFixture.TimedGuards timed = f.underShortStatementTimeout(4, "timeout")) {
      IdempotentExecutor executor = timed.executor();
      Inbox inbox = timed.inbox();
      try (Connection holder = f.ds.getConnection()) {
        holder.setAutoCommit(false);
        ExecutorFixture.hold(holder, executor, inbox, key, request);
        assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
        assertThat(executor.execute(key, Fingerprint.EMPTY, dsl.query("INSERT INTO payments (request, amount) VALUES (?, 1)", request)).inFlight()).isTrue();
        assertThat(inbox.receive(request, tx -> ExecutorFixture.pay(tx, request, 1)).inFlight()).isTrue();
        holder.commit();
      }
      // the caller's statement_timeout is in force again after the claim (PostgreSQL only: MariaDB's
      // own slow statements, SLEEP, end early at max_statement_time without an error)
      if (!f.maria()) {
        assertThatThrownBy(() -> executor.execute(IdempotencyKey.of("timeout", request + "-slow"), Fingerprint.EMPTY,
            Codec.utf8(), tx -> String.valueOf(tx.dsl().fetchValue("SELECT pg_sleep(1)::text"))))
            .satisfies(e -> assertThat(dev.idem.jdbc.internal.SqlStates.of(e)).isEqualTo("57014"));
      }
    }
    assertThat(f.payments(request)).isEqualTo(2); // the holder's two effects, nothing of the copies
  }

  /** An inbox copy behind a first copy that stalls is answered in flight after its bound, not held. */
  @Test
  void anInboxCopyBehindAStalledFirstCopyIsInFlightAfterItsBound() throws Exception {
    String id = "stalled-" + UUID.randomUUID();
    Inbox inbox = f.idem.inbox("stalled").inFlightWait(Duration.ofMillis(200)).retryAfter(Duration.ofSeconds(3)).build();
    try (Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      assertThat(inbox.receive(holder, id, tx -> ExecutorFixture.pay(tx, id, 1)).applied()).isTrue();
      long started = System.nanoTime();
      Execution<Void> copy = inbox.receive(id, tx -> ExecutorFixture.pay(tx, id, 1));
      assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(5));
      assertThat(copy).isInstanceOfSatisfying(Execution.InFlight.class,
          inFlight -> assertThat(inFlight.retryAfter()).isEqualTo(Duration.ofSeconds(3)));
      holder.commit();
    }
    assertThat(inbox.receive(id, tx -> ExecutorFixture.pay(tx, id, 1)).replayed()).isTrue();
    assertThat(f.payments(id)).isEqualTo(1);
    assertThat(f.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'stalled' AND message_id = ?", id)).isEqualTo(1);
  }

  /**
   * Repeats that reach an instance that never saw their keys (a new executor or inbox per repeat)
   * are answered without writing: no transaction id is assigned and no dead tuple is left, in
   * every form.
   */
  @Test
  void coldRepeatsWriteNothing() throws Exception {
    int repeats = 20;
    List<String> ids = new java.util.ArrayList<>();
    for (int i = 0; i < repeats; i++) {
      String id = "cold-" + UUID.randomUUID();
      ids.add(id);
      f.idem.executor().build().execute(IdempotencyKey.of("cold", id), Fingerprint.EMPTY, Codec.utf8(), tx -> "r");
      f.idem.inbox("cold").build().receive(id, tx -> {});
    }
    if (f.maria()) {
      coldRepeatsWriteNothingOnMariaDb(ids);
      return;
    }
    // On a server shared with other work (IDEM_JDBC_URL), ids taken by others count too: the
    // fewest of three rounds is this test's own.
    long fewest = Long.MAX_VALUE;
    for (int round = 0; round < 3; round++) {
      fewest = Math.min(fewest, idsTakenBy(ids));
    }
    // 80 recognised repeats a round; only the two txid_current() calls take an id (and a stray
    // one of the server's may): before the engine, every repeat of the inbox and of statements took one.
    assertThat(fewest).isLessThanOrEqualTo(3);
  }

  /**
   * MariaDB: the repeats, on one connection of their own, update and delete no row (the session's
   * Handler_update and Handler_delete, which count rows changed, not statements), and leave idem's
   * tables as they were (CHECKSUM TABLE). Handler_write is not asked: a claim's INSERT IGNORE that
   * meets the key counts an attempt there, though it inserts nothing; the checksums show it did not.
   */
  private static void coldRepeatsWriteNothingOnMariaDb(List<String> ids) throws Exception {
    try (var one = f.db.dataSource(1)) {
      Idem repeats = Idem.builder(one).build();
      String tables = checksums();
      long before = changed(one);
      for (String id : ids) {
        IdempotencyKey key = IdempotencyKey.of("cold", id);
        assertThat(repeats.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "again").value()).isEqualTo("r");
        assertThat(repeats.executor().build().execute(key, Fingerprint.EMPTY, dsl.query("SELECT 1")).replayed()).isTrue();
        assertThat(repeats.inbox("cold").build().receive(id, tx -> { throw new AssertionError("ran"); }).replayed()).isTrue();
        assertThat(repeats.inbox("cold").build().receive(id, dsl.query("SELECT 1/0")).replayed()).isTrue();
      }
      assertThat(changed(one)).as("rows updated or deleted by 80 recognised repeats").isEqualTo(before);
      assertThat(checksums()).as("idem's tables").isEqualTo(tables);
    }
  }

  /** MariaDB: the rows the pool's one session has updated or deleted, ever. */
  private static long changed(DataSource one) throws java.sql.SQLException {
    try (Connection c = one.getConnection(); java.sql.Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT SUM(variable_value) FROM information_schema.session_status"
            + " WHERE variable_name IN ('HANDLER_UPDATE', 'HANDLER_DELETE')")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static String checksums() {
    try (Connection c = f.ds.getConnection(); java.sql.Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("CHECKSUM TABLE idem_keys, idem_inbox EXTENDED")) {
      StringBuilder all = new StringBuilder();
      while (rs.next()) {
        all.append(rs.getString(1)).append('=').append(rs.getString(2)).append(';');
      }
      return all.toString();
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  private static long idsTakenBy(List<String> ids) {
    long before = f.count("SELECT txid_current()");
    for (String id : ids) {
      IdempotencyKey key = IdempotencyKey.of("cold", id);
      assertThat(f.idem.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "again").value()).isEqualTo("r");
      assertThat(f.idem.executor().build().execute(key, Fingerprint.EMPTY, dsl.query("SELECT 1")).replayed()).isTrue();
      assertThat(f.idem.inbox("cold").build().receive(id, tx -> { throw new AssertionError("ran"); }).replayed()).isTrue();
      assertThat(f.idem.inbox("cold").build().receive(id, dsl.query("SELECT 1/0")).replayed()).isTrue();
    }
    return f.count("SELECT txid_current()") - before;
  }

  /**
   * A DataSource that hands out the connection of a transaction already open (as Spring's
   * TransactionAwareDataSourceProxy does) is refused where idem would commit that transaction.
   */
  @Test
  void aDataSourceHandingOutAnOpenTransactionIsRefused() throws Exception {
    String request = "proxy-" + UUID.randomUUID();
    try (Connection bound = f.ds.getConnection()) {
      bound.setAutoCommit(false);
      ExecutorFixture.pay(new dev.idem.jdbc.tx.Tx() {
        public Connection connection() {
          return bound;
        }

        public DSLContext dsl() {
          return DSL.using(bound);
        }
      }, request, 7);
      Idem proxied = Idem.builder(new ThreadBound(bound)).build();
      assertThatThrownBy(() -> proxied.executor().build().execute(IdempotencyKey.of("proxy", request), Fingerprint.EMPTY,
          Codec.utf8(), tx -> "x"))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("inside an open transaction");
      bound.rollback();
    }
    assertThat(f.payments(request)).isZero(); // nothing of the caller's was committed behind its back
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'proxy' AND k.key = ?", request)).isZero();
  }

  /**
   * The same DataSource, on a call that reads first (its key handled here lately): the read runs
   * on "a connection of its own in auto-commit" ({@code AutoCommit.run}), which here is the
   * caller's, and {@code setAutoCommit(true)} commits the caller's open transaction (JDBC: changing
   * the mode in a transaction commits it), with no error. The repeat is then answered from the row;
   * the caller rolls back, but its payment is committed.
   */
  @Test
  void aDataSourceHandingOutAnOpenTransactionNeverHasItCommittedByTheReadFirst() throws Exception {
    String request = "proxy-read-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("proxy", request);
    Execution<String> repeat;
    try (Connection bound = f.ds.getConnection()) {
      Idem proxied = Idem.builder(new ThreadBound(bound)).answersFromMemory(Duration.ZERO).build();
      IdempotentExecutor executor = proxied.executor().build();
      assertThat(bound.getAutoCommit()).isTrue();
      assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1)).applied())
          .isTrue(); // no transaction open yet: idem's own; the key is now one handled here lately
      bound.setAutoCommit(false); // the caller's transaction begins, on the thread-bound connection
      dev.idem.jdbc.tx.Tx callers = new dev.idem.jdbc.tx.Tx() {
        public Connection connection() {
          return bound;
        }

        public DSLContext dsl() {
          return DSL.using(bound);
        }
      };
      ExecutorFixture.pay(callers, request + "-caller", 7);
      try {
        repeat = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
      } catch (IllegalStateException refused) {
        repeat = null; // refused as the other forms are: right
      }
      bound.rollback(); // the caller changes its mind
      bound.setAutoCommit(true);
    }
    assertThat(f.payments(request + "-caller")).as("the caller's rolled-back payment (the repeat: %s)", repeat).isZero();
  }

  /**
   * A transaction that wrote nothing but holds a lock (LOCK TABLE takes no transaction id) is the
   * caller's too: refused, its lock kept, nothing of idem's committed into it.
   */
  @Test
  void aDataSourceHandingOutATransactionThatOnlyLockedIsRefusedToo() throws Exception {
    String request = "locked-" + UUID.randomUUID();
    try (Connection bound = f.ds.getConnection()) {
      bound.setAutoCommit(false);
      try (java.sql.Statement st = bound.createStatement()) {
        // MariaDB: a locking read (its LOCK TABLES ends the transaction, and InnoDB tells no
        // session at once what another's transaction has locked)
        st.execute(f.maria() ? "SELECT * FROM payments FOR UPDATE" : "LOCK TABLE payments IN EXCLUSIVE MODE");
      }
      Idem proxied = Idem.builder(new ThreadBound(bound)).build();
      assertThatThrownBy(() -> proxied.executor().build().execute(IdempotencyKey.of("proxy", request), Fingerprint.EMPTY,
          Codec.utf8(), tx -> "x"))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("inside an open transaction");
      assertThat(f.count(f.maria()
          ? "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = " + LockWaits.pid(bound)
              + " AND trx_lock_structs > 0"
          : "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
              + " WHERE c.relname = 'payments' AND l.mode = 'ExclusiveLock' AND l.granted")).as("the caller's lock").isEqualTo(1);
      bound.rollback();
    }
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'proxy' AND k.key = ?", request)).isZero();
  }

  /**
   * A pooled connection whose last statement failed in auto-commit (an insert the application saw
   * refused and caught) holds no transaction: idem takes it in every form, on a pool of one, and
   * commits each key's row with its effect. MariaDB Connector/J marks every error as in a
   * transaction, and idem used to refuse such a connection as the caller's open transaction.
   */
  @Test
  void aConnectionWhoseLastStatementFailedInAutoCommitIsTakenInEveryForm() throws Exception {
    String run = "failed-last-" + UUID.randomUUID();
    try (HikariDataSource one = PoolOfOne.of(f.db)) {
      Idem idem = Idem.builder(one).build();
      List<String> requests = List.of(run + "-callback", run + "-statements", run + "-inbox", run + "-inbox-statements");
      for (String request : requests) {
        try (Connection c = one.getConnection(); java.sql.Statement st = c.createStatement()) {
          assertThat(c.getAutoCommit()).isTrue();
          assertThatThrownBy(() -> st.execute("INSERT INTO payments (request, amount) VALUES ('" + request + "', NULL)"))
              .isInstanceOf(java.sql.SQLException.class);
        }
        IdempotencyKey key = IdempotencyKey.of("failed-last", request);
        org.jooq.Query insert = DSL.query("INSERT INTO payments (request, amount) VALUES (?, 1)", request);
        Execution<?> e = switch (requests.indexOf(request)) {
          case 0 -> idem.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
          case 1 -> idem.executor().build().execute(key, Fingerprint.EMPTY, insert);
          case 2 -> idem.inbox("failed-last").build().receive(request, tx -> {
            ExecutorFixture.pay(tx, request, 1);
          });
          default -> idem.inbox("failed-last").build().receive(request, insert);
        };
        assertThat(e.applied()).as(request).isTrue();
      }
      for (String request : requests) {
        assertThat(f.payments(request)).as("payments of " + request).isEqualTo(1);
      }
      assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'failed-last' AND k.key LIKE '" + run + "%'"))
          .as("executor keys").isEqualTo(2);
      assertThat(f.count("SELECT count(*) FROM idem_inbox i WHERE i.consumer = 'failed-last' AND i.message_id LIKE '" + run + "%'"))
          .as("inbox ids").isEqualTo(2);
    }
  }

  /**
   * A string of statements long enough that pgjdbc sends a Sync part way (it does past about 256
   * statements, to avoid a deadlock on its socket), its last statement failing: nothing of it
   * commits, neither the claim nor the statements before the Sync, and a retry runs it whole.
   */
  @Test
  void aLongStringOfStatementsThatFailsCommitsNothing() {
    String request = "long-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("long", request);
    org.jooq.Query[] statements = new org.jooq.Query[300];
    for (int i = 0; i < statements.length - 1; i++) {
      statements[i] = dsl.query("INSERT INTO payments (request, amount) VALUES (?, ?)", request, i);
    }
    statements[statements.length - 1] = dsl.query("INSERT INTO no_such_table VALUES (1)");
    IdempotentExecutor executor = f.idem.executor().build();
    Inbox inbox = f.idem.inbox("long").build();
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, statements)).isInstanceOf(org.jooq.exception.DataAccessException.class);
    assertThatThrownBy(() -> inbox.receive(request, statements)).isInstanceOf(org.jooq.exception.DataAccessException.class);
    assertThat(f.payments(request)).isZero();
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'long' AND message_id = ?", request)).isZero();
    statements[statements.length - 1] = dsl.query("SELECT 1");
    assertThat(executor.execute(key, Fingerprint.EMPTY, statements).applied()).isTrue();
    assertThat(f.payments(request)).isEqualTo(299);
  }

  /** Hands out one connection, never closing it: a thread-bound transaction's. */
  private static final class ThreadBound extends DataSourceWrapper {
    private final Connection c;

    ThreadBound(Connection c) {
      this.c = c;
    }

    @Override
    public Connection getConnection() {
      return (Connection) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Connection.class},
          (proxy, method, args) -> method.getName().equals("close") ? null : method.invoke(c, args));
    }
  }
}
