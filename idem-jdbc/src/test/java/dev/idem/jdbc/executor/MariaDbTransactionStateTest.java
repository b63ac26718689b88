package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Where MariaDB's transaction state differs from PostgreSQL's under idem: an InnoDB deadlock
 * (1213) rolls back the WHOLE transaction (savepoints, idem's claim row and all) and the next
 * statement silently begins a new one; PostgreSQL aborts the transaction instead, which pgjdbc
 * reports and idem checks ({@code Driver.aborted}). Real deadlocks on real connections, on both
 * databases; each test reads the database afterwards. Each failed on MariaDB before idem checked
 * its claims before committing and took a gone savepoint for a rolled-back transaction.
 */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS,
    "CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL)",
    "CREATE TABLE ballast (id int NOT NULL)"})
class MariaDbTransactionStateTest {
  static ExecutorFixture f;
  static final ExecutorService pool = Executors.newCachedThreadPool();

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  @AfterAll
  static void stop() {
    pool.shutdownNow();
  }

  /**
   * Makes {@code c}'s transaction a deadlock's victim and throws the deadlock's error: {@code c}
   * locks account {@code a}; another transaction, heavier (it wrote 500 ballast rows, so InnoDB
   * picks the lighter one as victim), locks account {@code b} then waits for {@code a}; then {@code
   * c} updates {@code b}. {@code other[0]}: the other transaction's end (it commits once {@code
   * c}'s transaction is gone).
   */
  static void deadlockVictim(Connection c, int a, int b, Future<?>[] other) throws SQLException {
    try {
      other[0] = deadlockOn(c, a, b);
    } catch (SQLException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
    try (Statement st = c.createStatement()) {
      st.executeUpdate("UPDATE accounts SET n = n + 1 WHERE id = " + b);
    }
  }

  private static Future<?> deadlockOn(Connection c, int a, int b) throws Exception {
    try (Statement st = c.createStatement()) {
      st.executeUpdate("UPDATE accounts SET n = n + 1 WHERE id = " + a);
    }
    CountDownLatch holdsB = new CountDownLatch(1);
    Future<?> other = pool.submit(() -> {
      try (Connection o = f.ds.getConnection(); Statement st = o.createStatement()) {
        if (!f.maria()) {
          st.execute("SET deadlock_timeout = '10s'"); // PostgreSQL: the first to wait 1 s (the effect) is the victim
        }
        o.setAutoCommit(false);
        st.executeUpdate(f.maria() ? "INSERT INTO ballast (id) SELECT seq FROM seq_1_to_500"
            : "INSERT INTO ballast (id) SELECT g FROM generate_series(1, 500) g");
        st.executeUpdate("UPDATE accounts SET n = n + 1 WHERE id = " + b);
        holdsB.countDown();
        st.executeUpdate("UPDATE accounts SET n = n + 1 WHERE id = " + a);
        o.commit();
      }
      return null;
    });
    assertThat(holdsB.await(10, TimeUnit.SECONDS)).isTrue();
    LockWaits.await(f.db, 1, "%accounts%");
    return other;
  }

  static void accounts(int a, int b) {
    f.sql("INSERT INTO accounts (id, n) VALUES (" + a + ", 0), (" + b + ", 0)");
  }

  /**
   * A callback in idem's own transaction whose statement is a deadlock victim, its error caught
   * (best-effort work: MariaDB keeps the transaction after a failed statement, so catching is
   * ordinary there), then goes on and returns. On PostgreSQL idem refuses to commit (the
   * transaction is aborted). On MariaDB the deadlock rolled back the claim row and the payment
   * before it, and the statements after it ran in a new transaction: idem finds its claim gone
   * before committing, rolls that back and runs the call again. Either way: one run's payments,
   * one key row, and a repeat on another instance is answered from it.
   */
  @Test
  void aCaughtDeadlockInTheEffectNeverCommitsAnAppliedWithoutItsClaim() throws Exception {
    String request = "deadlock-owned-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("deadlock", request);
    IdempotentExecutor executor = f.idem.executor().build();
    accounts(11, 12);
    AtomicInteger runs = new AtomicInteger();
    AtomicInteger deadlocks = new AtomicInteger();
    Future<?>[] other = new Future<?>[1];
    Execution<String> first;
    try {
      first = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        runs.incrementAndGet();
        String paid = ExecutorFixture.pay(tx, request, 1);
        if (other[0] == null) {
          try {
            deadlockVictim(tx.connection(), 11, 12, other);
          } catch (SQLException e) {
            deadlocks.incrementAndGet(); // best effort: logged and carried on
          }
        }
        ExecutorFixture.pay(tx, request, 2);
        return paid;
      });
    } catch (Exception refused) {
      first = null; // refusing to commit is right (PostgreSQL's answer: the transaction is aborted)
    }
    other[0].get(30, TimeUnit.SECONDS);
    long paymentsAfterFirst = f.payments(request);
    long keyRowsAfterFirst = f.keyRows(key);
    int runsBeforeRepeat = runs.get();
    // a repeat on another instance (another node of the service): answered from the database, not from memory
    Execution<String> repeat = dev.idem.jdbc.Idem.builder(f.ds).build().executor().build()
        .execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          runs.incrementAndGet();
          ExecutorFixture.pay(tx, request, 1);
          ExecutorFixture.pay(tx, request, 2);
          return "again";
        });
    String seen = "first: " + first + ", deadlocks caught: " + deadlocks.get() + ", after it key rows " + keyRowsAfterFirst
        + " and payments " + paymentsAfterFirst + "; repeat: " + repeat + ", effect runs: " + runs.get()
        + ", payments now " + f.payments(request);
    if (first != null && first.applied()) {
      // Applied means committed, the claim row with one run's effect (idem may have refused to
      // commit the run that caught the deadlock and run it again): a repeat is answered from the row
      assertThat(keyRowsAfterFirst).as(seen).isEqualTo(1);
      assertThat(paymentsAfterFirst).as(seen).isEqualTo(2);
      assertThat(repeat.replayed()).as(seen).isTrue();
      assertThat(runs.get()).as(seen).isEqualTo(runsBeforeRepeat);
    } else {
      assertThat(paymentsAfterFirst).as(seen).isZero();
      assertThat(repeat.applied()).as(seen).isTrue();
    }
    assertThat(f.keyRows(key)).as(seen).isEqualTo(1);
    assertThat(f.payments(request)).as(seen).isEqualTo(2); // one run's two payments, whatever was repeated
  }

  /**
   * The same on a key whose row is past its window but not yet deleted: the call re-claims the row
   * (an update, which the deadlock rolls back to the old row) instead of inserting one. The run
   * that caught the deadlock is never committed onto the old row: one run's two payments and a
   * row re-claimed, by the executor and by an inbox batch.
   */
  @Test
  void aCaughtDeadlockAfterAReClaimIsNeverCommittedOntoTheOldRow() throws Exception {
    String request = "deadlock-reclaim-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("deadlock", request);
    IdempotentExecutor executor = f.idem.executor().window(dev.idem.window.DedupeWindow.of(java.time.Duration.ofSeconds(1))).build();
    Inbox inbox = f.idem.inbox("deadlock-reclaim").window(dev.idem.window.DedupeWindow.of(java.time.Duration.ofSeconds(1))).build();
    executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
    inbox.receiveAll(List.of(request + "-m"), m -> m, (tx, m) -> ExecutorFixture.pay(tx, m, 1));
    dev.idem.testing.Poll.until("both rows past their window", () -> f.count(f.maria()
        ? "SELECT count(*) FROM idem_keys k WHERE k.scope = 'deadlock' AND k.key = ? AND k.expires_at <= UTC_TIMESTAMP(6)"
        : "SELECT count(*) FROM idem_keys k WHERE k.scope = 'deadlock' AND k.key = ? AND k.expires_at <= now()", request) == 1
        && f.count(f.maria()
        ? "SELECT count(*) FROM idem_inbox i WHERE i.message_id = ? AND i.expires_at <= UTC_TIMESTAMP(6)"
        : "SELECT count(*) FROM idem_inbox i WHERE i.message_id = ? AND i.expires_at <= now()", request + "-m") == 1);
    accounts(61, 62);
    accounts(63, 64);
    Future<?>[] other = new Future<?>[2];
    AtomicInteger deadlocks = new AtomicInteger();
    Execution<String> again = null;
    try {
      again = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        String paid = ExecutorFixture.pay(tx, request, 1);
        if (other[0] == null) {
          try {
            deadlockVictim(tx.connection(), 61, 62, other);
          } catch (SQLException caught) {
            deadlocks.incrementAndGet(); // best effort: logged and carried on
          }
        }
        ExecutorFixture.pay(tx, request, 2);
        return paid;
      });
    } catch (Exception refused) {
      // PostgreSQL: the transaction is aborted, and idem refuses to commit it
    }
    Future<?>[] otherOfBatch = new Future<?>[1];
    dev.idem.jdbc.inbox.Received<String> received = inbox.receiveAll(List.of(request + "-m"), m -> m, (tx, m) -> {
      ExecutorFixture.pay(tx, m, 1);
      if (otherOfBatch[0] == null) {
        try {
          deadlockVictim(tx.connection(), 63, 64, otherOfBatch);
        } catch (SQLException caught) {
          deadlocks.incrementAndGet();
        }
      }
      ExecutorFixture.pay(tx, m, 2);
    });
    other[0].get(30, TimeUnit.SECONDS);
    otherOfBatch[0].get(30, TimeUnit.SECONDS);
    String seen = "again: " + again + ", received: " + received.applied() + ", deadlocks caught: " + deadlocks.get()
        + "; payments " + f.payments(request) + ", of the message " + f.payments(request + "-m");
    assertThat(deadlocks.get()).as(seen).isEqualTo(2);
    if (f.maria()) {
      // run again after the refused commit, and applied
      assertThat(again).as(seen).isNotNull();
      assertThat(received.applied()).as(seen).containsExactly(request + "-m");
    }
    // applied: the first call's one payment, then one run's two (never the one after the deadlock
    // alone, committed onto the old row); refused (PostgreSQL): nothing of the run
    assertThat(f.payments(request)).as(seen).isEqualTo(again != null && again.applied() ? 3 : 1);
    assertThat(f.payments(request + "-m")).as(seen).isEqualTo(received.applied().isEmpty() ? 1 : 3);
    assertThat(f.keyRows(key)).as(seen).isEqualTo(1);
    if (again != null && again.applied()) {
      assertThat(f.count(f.maria()
          ? "SELECT count(*) FROM idem_keys k WHERE k.scope = 'deadlock' AND k.key = ? AND k.expires_at > UTC_TIMESTAMP(6)"
          : "SELECT count(*) FROM idem_keys k WHERE k.scope = 'deadlock' AND k.key = ? AND k.expires_at > now()", request))
          .as("the row re-claimed, within its window again: " + seen).isEqualTo(1);
    }
  }

  /**
   * Joined calls in a transaction idem owns ({@code Idem.inTransaction}): the first is Applied;
   * the second's effect is a deadlock victim, and the caller catches the call's failure, as the
   * joined form allows ("whatever fails rolls back to the savepoint, so the caller's transaction
   * stays usable"), goes on and returns. On PostgreSQL the savepoint undoes only the second call.
   * On MariaDB the deadlock rolled back the whole transaction, the first call's claim and payment
   * with it: idem finds its savepoint gone and refuses to commit the rest (it committed it, and
   * the first key, answered Applied, had no row and no payment).
   */
  @Test
  void aDeadlockInAJoinedCallNeverLosesAnEarlierAppliedCallOfTheSameTransaction() throws Exception {
    String request = "deadlock-joined-" + UUID.randomUUID();
    IdempotencyKey first = IdempotencyKey.of("deadlock", request + "-1");
    IdempotencyKey second = IdempotencyKey.of("deadlock", request + "-2");
    IdempotentExecutor executor = f.idem.executor().build();
    accounts(21, 22);
    Future<?>[] other = new Future<?>[1];
    Execution<String>[] firstOutcome = new Execution[1];
    Exception[] secondFailure = new Exception[1];
    Exception outerFailure = null;
    try {
      f.idem.inTransaction(tx -> {
        firstOutcome[0] = executor.execute(first, Fingerprint.EMPTY, Codec.utf8(), t -> ExecutorFixture.pay(t, request + "-1", 1));
        try {
          executor.execute(second, Fingerprint.EMPTY, Codec.utf8(), t -> {
            ExecutorFixture.pay(t, request + "-2", 1);
            deadlockVictim(t.connection(), 21, 22, other);
            return "unreached";
          });
        } catch (Exception e) {
          secondFailure[0] = e; // the joined call failed: its part rolled back, the transaction goes on
        }
        ExecutorFixture.pay(tx, request + "-after", 1);
        return null;
      });
    } catch (Exception e) {
      outerFailure = e; // refusing to commit would be a right answer too
    }
    try {
      other[0].get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException victim) {
      // the other transaction was the victim (not the case this test is after)
    }
    String seen = "first: " + firstOutcome[0] + ", second failed with: " + secondFailure[0]
        + (secondFailure[0] == null ? "" : " suppressed " + java.util.Arrays.toString(secondFailure[0].getSuppressed()))
        + ", outer: " + outerFailure + "; now first key rows " + f.keyRows(first) + ", payments " + f.payments(request + "-1")
        + ", after-payments " + f.payments(request + "-after") + ", second key rows " + f.keyRows(second);
    assertThat(secondFailure[0]).as(seen).isNotNull();
    if (outerFailure == null) {
      // the outer transaction committed: every call it answered Applied is in it
      assertThat(firstOutcome[0].applied()).as(seen).isTrue();
      assertThat(f.keyRows(first)).as(seen).isEqualTo(1);
      assertThat(f.payments(request + "-1")).as(seen).isEqualTo(1);
      assertThat(f.payments(request + "-after")).as(seen).isEqualTo(1);
    } else {
      assertThat(f.payments(request + "-after")).as(seen).isZero();
    }
    assertThat(f.keyRows(second)).as(seen).isZero();
    assertThat(f.payments(request + "-2")).as(seen).isZero();
  }

  static boolean causedByDeadlock(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof SQLException sql && "40001".equals(sql.getSQLState()) || c instanceof SQLException e
          && "40P01".equals(e.getSQLState())) {
        return true;
      }
    }
    return false;
  }

  /**
   * A batch in idem's own transaction run again after a failed effect (message a), each effect
   * then under a savepoint: message b's effect is a deadlock victim. On PostgreSQL b's savepoint
   * takes its part back, b is reported failed with the deadlock, and c is applied. On MariaDB the
   * deadlock rolled back the whole transaction and its savepoints: the batch runs again whole (it
   * threw "SAVEPOINT idem_message does not exist", not retryable, the deadlock lost).
   */
  @Test
  void aDeadlockInABatchEffectUnderItsSavepointIsReportedAsTheDeadlock() throws Exception {
    String run = "deadlock-batch-" + UUID.randomUUID();
    Inbox inbox = f.idem.inbox("deadlock-batch").build();
    accounts(31, 32);
    Future<?>[] other = new Future<?>[1];
    List<String> messages = List.of(run + "-a", run + "-b", run + "-c");
    dev.idem.jdbc.inbox.Received<String> received = null;
    Exception failure = null;
    try {
      received = inbox.receiveAll(messages, m -> m, (tx, m) -> {
        if (m.endsWith("-a")) {
          throw new IllegalStateException("poison message");
        }
        ExecutorFixture.pay(tx, m, 1);
        if (m.endsWith("-b") && other[0] == null) {
          deadlockVictim(tx.connection(), 31, 32, other);
        }
      });
    } catch (Exception e) {
      failure = e;
    }
    try {
      other[0].get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException victim) {
      // the other transaction was the victim
    }
    String seen = "received: " + (received == null ? null : "applied " + received.applied() + ", failed "
        + received.failed().stream().map(x -> x.message() + ": " + x.error()).toList()) + ", thrown: " + failure
        + "; payments a " + f.payments(run + "-a") + ", b " + f.payments(run + "-b") + ", c " + f.payments(run + "-c");
    if (failure != null) {
      // the batch as a whole may fail only with what happened: the deadlock (retryable), nothing committed
      assertThat(causedByDeadlock(failure)).as(seen).isTrue();
      assertThat(f.payments(run + "-c")).as(seen).isZero();
    } else {
      // b is reported failed with the deadlock (PostgreSQL: its savepoint takes it back), or
      // applied (MariaDB: the deadlock took the whole batch, which ran again); either way its
      // outcome is what the database holds
      assertThat(received.applied()).as(seen).contains(run + "-c");
      assertThat(f.payments(run + "-c")).as(seen).isEqualTo(1);
      assertThat(f.payments(run + "-b")).as(seen).isEqualTo(received.applied().contains(run + "-b") ? 1 : 0);
      assertThat(f.count("SELECT count(*) FROM idem_inbox i WHERE i.consumer = 'deadlock-batch' AND i.message_id = ?",
          run + "-b")).as(seen).isEqualTo(received.applied().contains(run + "-b") ? 1 : 0);
      assertThat(f.payments(run + "-a")).as(seen).isZero();
    }
  }

  /**
   * A batch in idem's own transaction whose second message's effect catches a deadlock and goes
   * on: every message answered applied has its id row and its payment. On MariaDB the deadlock
   * rolled back the first message's claim and effect: idem finds the claims gone before
   * committing and runs the batch again (it committed the rest, and message a, reported applied,
   * had no row and no payment).
   */
  @Test
  void aDeadlockCaughtInABatchEffectNeverLosesAnEarlierAppliedMessage() throws Exception {
    String run = "deadlock-batch-caught-" + UUID.randomUUID();
    Inbox inbox = f.idem.inbox("deadlock-batch").build();
    accounts(41, 42);
    Future<?>[] other = new Future<?>[1];
    List<String> messages = List.of(run + "-a", run + "-b");
    dev.idem.jdbc.inbox.Received<String> received = null;
    Exception failure = null;
    try {
      received = inbox.receiveAll(messages, m -> m, (tx, m) -> {
        ExecutorFixture.pay(tx, m, 1);
        if (m.endsWith("-b") && other[0] == null) {
          try {
            deadlockVictim(tx.connection(), 41, 42, other);
          } catch (SQLException caught) {
            // best effort
          }
        }
      });
    } catch (Exception e) {
      failure = e;
    }
    try {
      other[0].get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException victim) {
      // the other transaction was the victim
    }
    long ids = f.count("SELECT count(*) FROM idem_inbox i WHERE i.consumer = 'deadlock-batch' AND i.message_id = ?", run + "-a");
    String seen = "received: " + (received == null ? null : "applied " + received.applied() + ", failed "
        + received.failed().stream().map(x -> x.message() + ": " + x.error()).toList()) + ", thrown: " + failure
        + "; payments a " + f.payments(run + "-a") + ", b " + f.payments(run + "-b") + ", id rows of a " + ids;
    if (received != null) {
      for (String m : received.applied()) {
        assertThat(f.payments(m)).as(seen + " (" + m + ")").isEqualTo(1);
        assertThat(f.count("SELECT count(*) FROM idem_inbox i WHERE i.consumer = 'deadlock-batch' AND i.message_id = ?", m))
            .as(seen + " (" + m + ")").isEqualTo(1);
      }
    }
  }

  /**
   * A batch whose effect receives a batch of another consumer, joined (it is this thread's open
   * transaction), in the outer batch's run under savepoints (after a poison message). PostgreSQL
   * stacks savepoints of one name; MariaDB replaces a savepoint of the same name, so the inner
   * batch's savepoints are named by its depth (the outer's release failed with 1305 when both had
   * one name, and the whole outer batch with it), as the joined single calls' are.
   */
  @Test
  void aBatchReceivedInsideAnotherBatchsEffectKeepsTheOuterBatch() {
    String run = "nested-batch-" + UUID.randomUUID();
    Inbox outer = f.idem.inbox("nested-outer").build();
    Inbox inner = f.idem.inbox("nested-inner").build();
    List<String> messages = List.of(run + "-a", run + "-b", run + "-c");
    dev.idem.jdbc.inbox.Received<String> received = null;
    Exception failure = null;
    try {
      received = outer.receiveAll(messages, m -> m, (tx, m) -> {
        if (m.endsWith("-a")) {
          throw new IllegalStateException("poison message");
        }
        ExecutorFixture.pay(tx, m, 1);
        if (m.endsWith("-b")) {
          inner.receiveAll(List.of(m + "-derived"), d -> d, (t, d) -> ExecutorFixture.pay(t, d, 1));
        }
      });
    } catch (Exception e) {
      failure = e;
    }
    String seen = "received: " + (received == null ? null : "applied " + received.applied() + ", failed "
        + received.failed().stream().map(x -> x.message() + ": " + x.error()).toList()) + ", thrown: " + failure
        + "; payments b " + f.payments(run + "-b") + ", b-derived " + f.payments(run + "-b-derived") + ", c "
        + f.payments(run + "-c");
    assertThat(failure).as(seen).isNull();
    assertThat(received.applied()).as(seen).containsExactly(run + "-b", run + "-c");
    assertThat(f.payments(run + "-b-derived")).as(seen).isEqualTo(1);
    assertThat(f.payments(run + "-c")).as(seen).isEqualTo(1);
  }

  /**
   * A callback in idem's own transaction whose first run is a deadlock victim and throws it: idem
   * runs it again in a new transaction (1213 is SQLSTATE 40001, retryable), which commits the
   * claim and one payment.
   */
  @Test
  void aDeadlockThrownByTheEffectRunsItAgainInAFreshTransaction() throws Exception {
    String request = "deadlock-retried-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("deadlock", request);
    accounts(51, 52);
    AtomicInteger runs = new AtomicInteger();
    Future<?>[] other = new Future<?>[1];
    Execution<String> e = f.idem.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      String paid = ExecutorFixture.pay(tx, request, 1);
      if (other[0] == null) {
        deadlockVictim(tx.connection(), 51, 52, other);
      }
      return paid;
    });
    other[0].get(30, TimeUnit.SECONDS);
    assertThat(e.applied()).isTrue();
    assertThat(runs.get()).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.payments(request)).isEqualTo(1);
  }
}
