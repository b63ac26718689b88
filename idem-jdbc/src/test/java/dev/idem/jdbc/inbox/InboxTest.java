package dev.idem.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.Racers;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

// a pool of 20: 16 racing copies, each on its own connection
@IdemTest(poolSize = 20, sql = "CREATE TABLE charges (message_id text NOT NULL, amount int NOT NULL)")
class InboxTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static Inbox billing;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
    billing = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).build();
  }

  @BeforeEach
  void clean() throws SQLException {
    // DELETE, not TRUNCATE: MariaDB's TRUNCATE waits for the metadata lock of any transaction that
    // read the table (one another test leaves to the pool's rollback), where a DELETE of rows no
    // one holds does not
    sql(VendorSql.maria(db) ? "DELETE FROM charges; DELETE FROM idem_inbox" : "TRUNCATE charges; TRUNCATE idem_inbox");
  }

  static void sql(String s) {
    db.execute(s);
  }

  static long count(String query) {
    return db.count(query);
  }

  static long charges(String id) {
    return count("SELECT count(*) FROM charges WHERE message_id = '" + id + "'");
  }

  static long inboxRows(String consumer, String id) {
    return count("SELECT count(*) FROM idem_inbox WHERE consumer = '" + consumer + "' AND message_id = '" + id + "'");
  }

  static void charge(dev.idem.jdbc.tx.Tx tx, String id) {
    tx.dsl().execute("INSERT INTO charges VALUES (?, 10)", id);
  }

  @Test
  void aDuplicateIsAlreadyDoneAndDoesNotRunTheEffect() {
    assertThat(billing.receive("m-1", tx -> charge(tx, "m-1"))).matches(Execution::applied);
    int[] ran = {0};
    assertThat(billing.receive("m-1", tx -> {
      ran[0]++;
      charge(tx, "m-1");
    })).matches(Execution::replayed);
    assertThat(ran[0]).isZero();
    assertThat(charges("m-1")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-1")).isEqualTo(1);
  }

  @Test
  void consumersAreSeparate() {
    Inbox audit = idem.inbox("audit").window(DedupeWindow.of(Duration.ofDays(1))).build();
    assertThat(billing.receive("m-2", tx -> charge(tx, "m-2"))).matches(Execution::applied);
    assertThat(audit.receive("m-2", tx -> charge(tx, "m-2"))).matches(Execution::applied);
    assertThat(charges("m-2")).isEqualTo(2);
    assertThat(inboxRows("billing", "m-2")).isEqualTo(1);
    assertThat(inboxRows("audit", "m-2")).isEqualTo(1);
  }

  @Test
  void anExceptionInTheEffectRollsBackTheClaimSoARedeliveryRuns() {
    assertThatThrownBy(() -> billing.receive("m-3", tx -> {
      charge(tx, "m-3");
      throw new IOException("ledger offline");
    })).isInstanceOf(IOException.class).hasMessage("ledger offline");
    assertThat(charges("m-3")).isZero();
    assertThat(inboxRows("billing", "m-3")).isZero();

    assertThat(billing.receive("m-3", tx -> charge(tx, "m-3"))).matches(Execution::applied);
    assertThat(charges("m-3")).isEqualTo(1);
  }

  @Test
  void concurrentCopiesRunTheEffectOnce() throws Exception {
    int copies = 16;
    Racers.opened(ds, copies);
    List<Execution<Void>> results = Race.together(copies, i -> billing.receive("m-race", tx -> {
      charge(tx, "m-race");
      LockWaits.await(db, copies - 1); // hold the claim until all the others wait on it
    }));
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).filteredOn(Execution::replayed).hasSize(copies - 1);
    assertThat(charges("m-race")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-race")).isEqualTo(1);
  }

  /**
   * On a pool at REPEATABLE READ or SERIALIZABLE and with no re-runs allowed for failures after the
   * effect, copies of one message still get ALREADY_DONE: a copy whose claim waited for the first
   * one's row fails with 40001 before its effect ran, and runs again without spending a re-run.
   * The same at READ UNCOMMITTED and READ COMMITTED (every level MariaDB has).
   */
  @ParameterizedTest
  @CsvSource({"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void underStricterIsolationCopiesAreAlreadyDoneNotErrors(String isolation) throws Exception {
    String id = "m-strict-" + isolation;
    DataSource pool = Racers.pool(db, 8, isolation);
    Inbox strict = Idem.builder(pool).retries(RetryBudget.NONE).build().inbox("billing")
        .window(DedupeWindow.of(Duration.ofDays(7))).build();
    List<Execution<Void>> results = Race.together(8, i -> strict.receive(id, tx -> {
      charge(tx, id);
      LockWaits.await(db, 7); // hold the claim until all the others wait on it
    }));
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).filteredOn(Execution::replayed).hasSize(7);
    assertThat(charges(id)).isEqualTo(1);
    assertThat(inboxRows("billing", id)).isEqualTo(1);
  }

  @Test
  void aCopyWaitingOnAWinnerThatRollsBackRunsTheEffect() throws Exception {
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch fail = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    Future<Execution<Void>> first = pool.submit(() -> billing.receive("m-4", tx -> {
      charge(tx, "m-4");
      claimed.countDown();
      fail.await();
      throw new IllegalStateException("winner fails");
    }));
    assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
    Future<Execution<Void>> second = pool.submit(() -> billing.receive("m-4", tx -> charge(tx, "m-4")));
    // the second copy is blocked on the first one's claim (a lock wait), not finished
    LockWaits.await(db, 1);
    assertThat(second.isDone()).isFalse();
    fail.countDown();
    assertThatThrownBy(first::get).hasCauseInstanceOf(IllegalStateException.class);
    assertThat(second.get(10, TimeUnit.SECONDS)).matches(Execution::applied);
    pool.shutdown();
    assertThat(charges("m-4")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-4")).isEqualTo(1);
  }

  @Test
  void joiningTheCallersTransactionCommitsOrRollsBackWithIt() throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(billing.receive(c, "m-5", tx -> charge(tx, "m-5"))).matches(Execution::applied);
      c.rollback();
      assertThat(charges("m-5")).isZero();
      assertThat(inboxRows("billing", "m-5")).isZero();

      assertThat(billing.receive(c, "m-5", tx -> charge(tx, "m-5"))).matches(Execution::applied);
      assertThat(billing.receive(c, "m-5", tx -> charge(tx, "m-5"))).matches(Execution::replayed);
      // an effect that fails undoes only its own work (a savepoint); the caller's transaction goes on
      assertThatThrownBy(() -> billing.receive(c, "m-6", tx -> {
        charge(tx, "m-6");
        throw new IOException("no");
      })).isInstanceOf(IOException.class);
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(charges("m-5")).isEqualTo(1);
    assertThat(charges("m-6")).isZero();
    assertThat(inboxRows("billing", "m-5")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-6")).isZero();
  }

  /**
   * ROLLBACK TO SAVEPOINT keeps the savepoint. Left open, every failed call would leave the caller
   * inside one more subtransaction until its transaction ends; the caller's next write shows it,
   * stamped with a subtransaction's id instead of its own transaction's.
   */
  @Test
  void aFailedJoinedCallLeavesTheCallerAtItsOwnTransactionLevel() throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      for (int i = 0; i < 3; i++) {
        String id = "m-sp-" + i;
        assertThatThrownBy(() -> billing.receive(c, id, tx -> {
          charge(tx, id);
          throw new IOException("no");
        })).isInstanceOf(IOException.class);
      }
      try (var st = c.createStatement()) {
        st.execute("INSERT INTO charges VALUES ('caller-after-failures', 1)");
        if (VendorSql.maria(db)) {
          // MariaDB stamps no row with a subtransaction: no savepoint of idem's is left to release
          assertThatThrownBy(() -> st.execute("RELEASE SAVEPOINT idem_claim"))
              .as("no leftover savepoint").hasMessageContaining("does not exist");
        } else {
          try (var rs = st.executeQuery("SELECT xmin = pg_current_xact_id()::xid FROM charges"
              + " WHERE message_id = 'caller-after-failures'")) {
            rs.next();
            assertThat(rs.getBoolean(1)).as("the caller's write is in its own transaction, not a leftover savepoint").isTrue();
          }
        }
      }
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(charges("caller-after-failures")).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM charges WHERE message_id LIKE 'm-sp-%'")).isZero();
    assertThat(count("SELECT count(*) FROM idem_inbox WHERE message_id LIKE 'm-sp-%'")).isZero();
  }

  /**
   * An effect that catches an SQL error of its own leaves PostgreSQL's transaction aborted; a joined
   * call must still undo only its own part: it fails, and the caller's transaction goes on. (MariaDB
   * rolls back the failed statement alone and the transaction goes on whole: {@link
   * #onMariaDbAnEffectThatSwallowedAnSqlErrorIsAppliedWithWhatItWrote}.)
   */
  @Test
  void aJoinedCallWhoseEffectSwallowedAnSqlErrorFailsAndLeavesTheCallersTransactionUsable() throws SQLException {
    org.junit.jupiter.api.Assumptions.assumeFalse(VendorSql.maria(db), "PostgreSQL only: its aborted transactions");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThatThrownBy(() -> billing.receive(c, "m-swallow", tx -> {
        charge(tx, "m-swallow");
        try {
          tx.dsl().execute("INSERT INTO no_such_table VALUES (1)");
        } catch (org.jooq.exception.DataAccessException ignored) {
          // the effect's own mistake, caught
        }
      })).isInstanceOf(org.jooq.exception.DataAccessException.class).hasMessageContaining("caught its error");
      try (var st = c.createStatement()) {
        st.execute("INSERT INTO charges VALUES ('caller-goes-on', 10)"); // fails if the transaction were aborted
      }
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(charges("caller-goes-on")).isEqualTo(1);
    assertThat(charges("m-swallow")).isZero();
    assertThat(inboxRows("billing", "m-swallow")).isZero();
  }

  /**
   * MariaDB: a failed statement is rolled back alone and the transaction goes on, so an effect that
   * caught its own SQL error committed what it wrote besides: applied, its charge and its inbox row
   * committed with the caller's transaction.
   */
  @Test
  void onMariaDbAnEffectThatSwallowedAnSqlErrorIsAppliedWithWhatItWrote() throws SQLException {
    org.junit.jupiter.api.Assumptions.assumeTrue(VendorSql.maria(db), "MariaDB's statement-level rollback");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(billing.receive(c, "m-swallow-maria", tx -> {
        charge(tx, "m-swallow-maria");
        try {
          tx.dsl().execute("INSERT INTO no_such_table VALUES (1)");
        } catch (org.jooq.exception.DataAccessException ignored) {
          // the effect's own mistake, caught: MariaDB undid that statement only
        }
      })).matches(Execution::applied);
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(charges("m-swallow-maria")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-swallow-maria")).isEqualTo(1);
  }

  /** The savepoint handling holds under pgjdbc's autosave modes too, which set savepoints of their own. */
  @ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(strings = {"autosave=always", "autosave=always&cleanupSavepoints=true",
      "autosave=conservative&cleanupSavepoints=true"})
  void aFailedJoinedCallLeavesTheCallersTransactionUsableUnderAutosave(String params) throws Exception {
    org.junit.jupiter.api.Assumptions.assumeFalse(VendorSql.maria(db), "PostgreSQL only: pgjdbc's autosave");
    try (HikariDataSource autosave = db.dataSourceWithDriverParams(1, params)) {
      try (Connection c = autosave.getConnection()) {
        c.setAutoCommit(false);
        if (Driver.losesSavepoints(c)) {
          // pgjdbc before 42.7.10 under autosave=always: refused before anything is sent
          assertThatThrownBy(() -> billing.receive(c, "m-auto-2", tx -> charge(tx, "m-auto-2")))
              .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("42.7.10");
          c.rollback();
          c.setAutoCommit(true);
          assertThat(inboxRows("billing", "m-auto-2")).isZero();
          return;
        }
        assertThatThrownBy(() -> billing.receive(c, "m-auto-1", tx -> {
          charge(tx, "m-auto-1");
          throw new IOException("no");
        })).isInstanceOf(IOException.class).satisfies(e -> assertThat(e.getSuppressed()).isEmpty());
        assertThat(billing.receive(c, "m-auto-2", tx -> charge(tx, "m-auto-2"))).matches(Execution::applied);
        c.commit();
        c.setAutoCommit(true);
      }
    }
    assertThat(charges("m-auto-1")).isZero();
    assertThat(inboxRows("billing", "m-auto-1")).isZero();
    assertThat(charges("m-auto-2")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-auto-2")).isEqualTo(1);
  }

  @Test
  void insideAnIdemTransactionItJoins() {
    idem.useTransaction(tx -> {
      charge(tx, "outer");
      assertThat(billing.receive("m-7", t -> charge(t, "m-7"))).matches(Execution::applied);
    });
    assertThat(charges("outer")).isEqualTo(1);
    assertThat(charges("m-7")).isEqualTo(1);
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      billing.receive("m-8", t -> charge(t, "m-8"));
      throw new IOException("outer fails");
    })).isInstanceOf(IOException.class);
    assertThat(charges("m-8")).isZero();
    assertThat(inboxRows("billing", "m-8")).isZero();
  }

  @Test
  void badIdsAreRefusedAndChangeNothing() throws SQLException {
    for (String bad : new String[] {null, "", "has space", "x".repeat(256), "caf\u00e9"}) {
      assertThatThrownBy(() -> billing.receive(bad, tx -> charge(tx, "bad")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message id");
    }
    assertThatThrownBy(() -> billing.receive("ok", (dev.idem.jdbc.tx.TxConsumer<RuntimeException>) null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("effect");
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> billing.receive(c, "ok", tx -> charge(tx, "bad")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
    }
    assertThatThrownBy(() -> idem.inbox("bad consumer").window(DedupeWindow.of(Duration.ofDays(1))).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("consumer");
    assertThat(idem.inbox("c").build().window()).as("the default window")
        .isEqualTo(DedupeWindow.covering(dev.idem.window.RepeatSource.KAFKA_REPLAY));
    // a window the database could not add to its clock is refused when built, not at the first receive
    assertThatThrownBy(() -> idem.inbox("c").window(DedupeWindow.of(Duration.ofDays(200 * 366))).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("window");
    assertThat(count("SELECT count(*) FROM charges")).isZero();
    assertThat(count("SELECT count(*) FROM idem_inbox")).isZero();
  }

  /**
   * Ids are compared byte for byte on both databases (MariaDB's idem_inbox is utf8mb4_bin, where
   * its default collations fold case and trailing spaces): ids differing only by case are three
   * ids. An id with a trailing space, an id longer than the column could hold (512 on MariaDB) or
   * than idem's 255, and a consumer longer than 255, are refused naming the argument, writing
   * nothing.
   */
  @Test
  void idsDifferingOnlyByCaseAreDistinctAndOverlongIdsOrConsumersAreRefusedWritingNothing() {
    for (String id : List.of("Case-1", "case-1", "CASE-1")) {
      assertThat(billing.receive(id, tx -> charge(tx, id))).as(id).matches(Execution::applied);
    }
    assertThat(count("SELECT count(*) FROM idem_inbox WHERE consumer = 'billing' AND message_id IN ('Case-1', 'case-1', 'CASE-1')"))
        .isEqualTo(3);
    for (String id : List.of("Case-1", "case-1", "CASE-1")) {
      assertThat(inboxRows("billing", id)).as(id).isEqualTo(1);
      assertThat(billing.receive(id, tx -> charge(tx, id))).as(id).matches(Execution::replayed);
    }
    assertThat(count("SELECT count(*) FROM charges")).isEqualTo(3);
    assertThatThrownBy(() -> billing.receive("case-1 ", tx -> charge(tx, "x")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message id");
    for (int length : new int[] {256, 513}) {
      assertThatThrownBy(() -> billing.receive("x".repeat(length), tx -> charge(tx, "x")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message id").hasMessageContaining("at most 255");
      assertThatThrownBy(() -> billing.receiveAll(List.of("ok-" + length, "x".repeat(length)), m -> m, (tx, m) -> charge(tx, m)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message id of messages[1]");
    }
    assertThatThrownBy(() -> idem.inbox("c".repeat(256)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("consumer").hasMessageContaining("at most 255");
    assertThat(count("SELECT count(*) FROM charges")).isEqualTo(3);
    assertThat(count("SELECT count(*) FROM idem_inbox")).isEqualTo(3);
  }

  @Test
  void anIdPastItsWindowIsClaimedAgainAndExpireDeletesInBatches() throws Exception {
    Inbox brief = idem.inbox("brief").window(DedupeWindow.of(Duration.ofMillis(200))).build();
    assertThat(brief.receive("m-9", tx -> charge(tx, "m-9"))).matches(Execution::applied);
    assertThat(brief.receive("m-9", tx -> charge(tx, "m-9"))).matches(Execution::replayed);
    for (int i = 0; i < 2500; i++) {
      brief.receive("bulk-" + i, tx -> {});
    }
    assertThat(billing.receive("m-10", tx -> {})).matches(Execution::applied); // another consumer, long window
    // the database clock decides: wait until the database says the window is over
    Poll.until("m-9 past its window on the database clock", () -> count("SELECT count(*) FROM idem_inbox"
        + " WHERE consumer = 'brief' AND message_id = 'm-9' AND expires_at < " + VendorSql.clock(db)) == 1);
    assertThat(brief.receive("m-9", tx -> charge(tx, "m-9"))).matches(Execution::applied);
    assertThat(charges("m-9")).isEqualTo(2);
    assertThat(inboxRows("brief", "m-9")).isEqualTo(1);

    Poll.until("the bulk ids past their window on the database clock", () -> count("SELECT count(*) FROM idem_inbox"
        + " WHERE consumer = 'brief' AND expires_at >= " + VendorSql.clock(db) + " AND message_id <> 'm-9'") == 0);
    long before = count("SELECT count(*) FROM idem_inbox WHERE consumer = 'brief'");
    long deleted = brief.expire(); // three batches of at most 1000
    // all 2500 bulk ids were past their window; the re-claimed m-9 may or may not be by now
    assertThat(deleted).isBetween(2500L, 2501L);
    assertThat(count("SELECT count(*) FROM idem_inbox WHERE consumer = 'brief'")).isEqualTo(before - deleted);
    assertThat(count("SELECT count(*) FROM idem_inbox WHERE consumer = 'brief' AND message_id LIKE 'bulk-%'")).isZero();
    assertThat(inboxRows("billing", "m-10")).isEqualTo(1);
  }

  @Test
  void eventsReportFirstCopiesAndRepeatsWithTheirAgeAndAFailingListenerBreaksNothing() throws Exception {
    List<dev.idem.event.IdemEvent> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
    Idem watched = Idem.builder(ds).listener(new dev.idem.event.IdemListener() {
      @Override
      public void onApplied(dev.idem.event.IdemEvent.Applied e) {
        seen.add(e);
        throw new IllegalStateException("listener bug");
      }

      @Override
      public void onReplayed(dev.idem.event.IdemEvent.Replayed e) {
        seen.add(e);
        throw new IllegalStateException("listener bug");
      }
    }).build();
    Inbox inbox = watched.inbox("watched").window(DedupeWindow.of(Duration.ofDays(1))).build();
    assertThat(inbox.receive("m-11", tx -> charge(tx, "m-11"))).matches(Execution::applied);
    Poll.until("m-11 50 ms old on the database clock", () -> count("SELECT count(*) FROM idem_inbox"
        + " WHERE consumer = 'watched' AND message_id = 'm-11' AND received_at <= "
        + VendorSql.clockPlus(db, Duration.ofMillis(-50))) == 1);
    assertThat(inbox.receive("m-11", tx -> charge(tx, "m-11"))).matches(Execution::replayed);
    assertThat(charges("m-11")).isEqualTo(1);
    assertThat(seen).hasSize(2);
    assertThat(seen.get(0)).isInstanceOf(dev.idem.event.IdemEvent.Applied.class);
    var replayed = (dev.idem.event.IdemEvent.Replayed) seen.get(1);
    assertThat(replayed.key().value()).isEqualTo("m-11");
    assertThat(replayed.age()).isGreaterThanOrEqualTo(Duration.ofMillis(40)).isLessThan(Duration.ofMinutes(1));
  }
}
