package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.jdbc.ClaimOrder;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link ClaimOrder#AT_COMMIT}: the effect first, the key row with the commit. What each kind of
 * repeat gets, and that the database holds one effect per key whatever ran. A second executor on
 * the same database stands for another process: it has not seen the keys the first handled, so it
 * does not read before running the effect.
 */
class ClaimAtCommitTest {
  static ExecutorFixture f;
  static IdempotentExecutor executor;
  static IdempotentExecutor otherProcess;
  static ExecutorService background;

  @BeforeAll
  static void start() {
    f = new ExecutorFixture("executor_at_commit", 6);
    // The user's own guard against a second payment for an order: what a repeat's effect runs into.
    f.sql("CREATE TABLE orders_paid (order_id text PRIMARY KEY, payment text NOT NULL)");
    executor = atCommit(Duration.ofSeconds(10));
    otherProcess = atCommit(Duration.ofSeconds(10));
    background = Executors.newCachedThreadPool();
  }

  static IdempotentExecutor atCommit(Duration inFlightWait) {
    return f.idem.executor().claimOrder(ClaimOrder.AT_COMMIT).window(DedupeWindow.of(Duration.ofHours(1)))
        .inFlightWait(inFlightWait).retryAfter(Duration.ofMillis(700)).build();
  }

  @AfterAll
  static void stop() {
    background.shutdownNow();
    f.close();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("merchant-1/payments", UUID.randomUUID().toString());
  }

  /** Pays once per order: a second payment for the same order fails on the user's primary key. */
  static String payOrder(dev.idem.jdbc.Tx tx, String order, int amount) throws SQLException {
    String payment = ExecutorFixture.pay(tx, order, amount);
    try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO orders_paid VALUES (?, ?)")) {
      ps.setString(1, order);
      ps.setString(2, payment);
      ps.executeUpdate();
    }
    return payment;
  }

  @Test
  void aNewKeyCommitsTheEffectAndItsCompletedKeyRowTogether() throws Exception {
    IdempotencyKey key = newKey();
    Execution<String> e = executor.execute(key, Fingerprint.of("pay 100"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 100));

    assertThat(e.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("1");
    assertThat(f.column(key, "convert_from(result, 'UTF8')")).isEqualTo(e.value());
    assertThat(f.column(key, "completed_at = created_at")).isEqualTo("true");
    assertThat(f.column(key, "expires_at - created_at")).isEqualTo("01:00:00");
    assertThat(f.events.of(IdemEvent.Applied.class, key)).hasSize(1);
  }

  @Test
  void aRepeatThisProcessHandledIsReplayedWithoutRunningTheEffect() throws Exception {
    IdempotencyKey key = newKey();
    AtomicInteger runs = new AtomicInteger();
    Execution<String> first = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 1);
    });
    Execution<String> repeat = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 1);
    });
    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.value()).isEqualTo(first.value());
    assertThat(runs).hasValue(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aRepeatInAnotherProcessRunsTheCallbackButCommitsNothingAndGetsTheFirstResult() throws Exception {
    IdempotencyKey key = newKey();
    AtomicInteger runs = new AtomicInteger();
    Execution<String> first = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 1);
    });
    String rowBefore = f.keyRow(key);

    Execution<String> repeat = otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 1);
    });

    assertThat(repeat).isInstanceOf(Execution.Replayed.class);
    assertThat(repeat.value()).isEqualTo(first.value());
    assertThat(runs).hasValue(2); // the documented cost of this order: the callback ran, and was rolled back
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRow(key)).isEqualTo(rowBefore);
    assertThat(f.events.of(IdemEvent.Replayed.class, key)).hasSize(1);
  }

  @Test
  void aRepeatWhoseEffectFailsOnTheFirstCopysRowsIsAnsweredAsARepeatNotAnError() throws Exception {
    IdempotencyKey key = newKey();
    String order = "order-" + key.value();
    Execution<String> first = executor.execute(key, Fingerprint.of(order), Codec.utf8(), tx -> payOrder(tx, order, 40));

    Execution<String> repeat = otherProcess.execute(key, Fingerprint.of(order), Codec.utf8(), tx -> payOrder(tx, order, 40));

    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.value()).isEqualTo(first.value());
    assertThat(f.count("SELECT count(*) FROM orders_paid WHERE order_id = ?", order)).isEqualTo(1);
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void aRepeatWithAnotherRequestIsRefusedAndChangesNothing() throws Exception {
    IdempotencyKey key = newKey();
    String order = "order-" + key.value();
    executor.execute(key, Fingerprint.of("pay 40"), Codec.utf8(), tx -> payOrder(tx, order, 40));
    String rowBefore = f.keyRow(key);

    // The other request's effect fails on the first one's order row; the answer is still the misuse of the key.
    assertThatThrownBy(() -> otherProcess.execute(key, Fingerprint.of("pay 50"), Codec.utf8(), tx -> payOrder(tx, order, 50)))
        .isInstanceOfSatisfying(KeyReuseException.class, e -> assertThat(e.getSuppressed()).hasSize(1));
    // Its effect succeeds (another order): refused all the same, and rolled back.
    assertThatThrownBy(() -> otherProcess.execute(key, Fingerprint.of("pay 60"), Codec.utf8(), tx -> payOrder(tx, order + "-b", 60)))
        .isInstanceOf(KeyReuseException.class);

    assertThat(f.keyRow(key)).isEqualTo(rowBefore);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.payments(order + "-b")).isZero();
    assertThat(f.count("SELECT count(*) FROM orders_paid WHERE order_id LIKE ?", order + "%")).isEqualTo(1);
    assertThat(f.events.of(IdemEvent.FingerprintMismatch.class, key)).hasSize(2);
  }

  @Test
  void anEffectThatThrowsLeavesNoKeyAndNoEffectAndTheExceptionAsItWas() throws Exception {
    IdempotencyKey key = newKey();
    IOException failure = new IOException("card network down");
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      ExecutorFixture.pay(tx, key.value(), 1);
      throw failure;
    })).isSameAs(failure);
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();

    Execution<String> retry = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(retry.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aResultTheCodecCannotEncodeRollsTheEffectBack() {
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, ExecutorFixture.unencodable(),
        tx -> ExecutorFixture.pay(tx, key.value(), 1)))
        .isInstanceOf(CodecException.class)
        .hasMessageContaining("could not be encoded")
        .hasMessageContaining("the effect was rolled back");
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();
  }

  @Test
  void aKeyPastItsWindowRunsAgainAndIsReclaimedWithAHigherFence() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().claimOrder(ClaimOrder.AT_COMMIT)
        .window(DedupeWindow.of(Duration.ofMillis(500))).build();
    IdempotencyKey key = newKey();
    shortMemory.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    f.sql("SELECT pg_sleep(0.6)");

    Execution<String> again = atCommit(Duration.ofSeconds(1)).execute(key, Fingerprint.of("b"), Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, key.value(), 2));

    assertThat(again.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.column(key, "convert_from(result, 'UTF8')")).isEqualTo(again.value());
  }

  @Test
  void whoeverCommitsFirstWinsAndTheOtherCopyGetsItsResult() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch paid = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    Future<Execution<String>> slow = background.submit(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      String id = ExecutorFixture.pay(tx, key.value(), 1);
      paid.countDown();
      finish.await(10, TimeUnit.SECONDS);
      return id;
    }));
    assertThat(paid.await(10, TimeUnit.SECONDS)).isTrue();

    Execution<String> fast = otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2));
    finish.countDown();
    Execution<String> late = slow.get(10, TimeUnit.SECONDS);

    assertThat(fast.applied()).isTrue();
    assertThat(late.replayed()).isTrue();
    assertThat(late.value()).isEqualTo(fast.value());
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.count("SELECT amount FROM payments WHERE request = ?", key.value())).isEqualTo(2);
  }

  @Test
  void aCopyFindingTheKeyHeldWaitsAtItsCommitAndGetsTheReplayWhenTheHolderCommits() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      // A call joining a caller's transaction claims first and holds the key until that commits.
      Execution<String> held = executor.execute(holder, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
      assertThat(held.applied()).isTrue();
      Future<Execution<String>> waiting = background.submit(() ->
          otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2)));
      Thread.sleep(300);
      assertThat(waiting.isDone()).as("the copy waits on the held key at its commit").isFalse();
      holder.commit();
      Execution<String> repeat = waiting.get(10, TimeUnit.SECONDS);
      assertThat(repeat.replayed()).isTrue();
      assertThat(repeat.value()).isEqualTo(held.value());
    }
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aCopyFindingTheKeyHeldPastTheWaitIsInFlightAndItsEffectIsRolledBack() throws Exception {
    IdempotencyKey key = newKey();
    IdempotentExecutor impatient = atCommit(Duration.ZERO);
    try (Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      executor.execute(holder, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));

      Execution<String> busy = impatient.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2));

      assertThat(busy).isInstanceOfSatisfying(Execution.InFlight.class,
          i -> assertThat(i.retryAfter()).isEqualTo(Duration.ofMillis(700)));
      assertThat(f.events.of(IdemEvent.InFlight.class, key)).hasSize(1);
      holder.rollback();
    }
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void theClaimsWaitBoundDoesNotOutliveItsTransaction() throws Exception {
    try (var pool = f.db.dataSource(1)) {
      IdempotentExecutor onOneConnection = dev.idem.jdbc.Idem.builder(pool).build().executor()
          .claimOrder(ClaimOrder.AT_COMMIT).inFlightWait(Duration.ofMillis(1234)).build();
      IdempotencyKey key = newKey();
      onOneConnection.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
      try (Connection c = pool.getConnection(); Statement st = c.createStatement(); var rs = st.executeQuery("SHOW lock_timeout")) {
        rs.next();
        assertThat(rs.getString(1)).isEqualTo("0");
      }
      assertThat(f.payments(key.value())).isEqualTo(1);
    }
  }

  @Test
  void aCallInsideTheCallersTransactionStillClaimsFirst() throws Exception {
    IdempotencyKey key = newKey();
    AtomicInteger runs = new AtomicInteger();
    executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 1);
    });
    Execution<String> joined = f.idem.inTransaction(tx -> otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), inner -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(inner, key.value(), 1);
    }));
    assertThat(joined.replayed()).isTrue();
    assertThat(runs).hasValue(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void theCallersDeferredChecksAtCommitWaitAsTheCallerSetThemNotAsTheClaimsBound() throws Exception {
    f.sql("CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY);"
        + " CREATE TABLE IF NOT EXISTS entries (account int REFERENCES accounts DEFERRABLE INITIALLY DEFERRED, note text);"
        + " INSERT INTO accounts VALUES (1) ON CONFLICT DO NOTHING");
    IdempotentExecutor impatient = atCommit(Duration.ZERO); // the claim's own wait: 1 ms
    IdempotencyKey key = newKey();
    try (Connection locker = f.ds.getConnection()) {
      locker.setAutoCommit(false);
      try (Statement st = locker.createStatement()) {
        st.execute("SELECT * FROM accounts WHERE id = 1 FOR UPDATE"); // the deferred check at commit waits on this
      }
      Future<Execution<String>> call = background.submit(() -> impatient.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        tx.dsl().execute("INSERT INTO entries VALUES (1, ?)", key.value());
        return "booked";
      }));
      Thread.sleep(300);
      assertThat(call.isDone()).as("the foreign-key check waits for the lock, as the caller's own setting says").isFalse();
      locker.commit();
      assertThat(call.get(10, TimeUnit.SECONDS).applied()).isTrue();
    }
    assertThat(f.count("SELECT count(*) FROM entries WHERE note = ?", key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.events.of(IdemEvent.InFlight.class, key)).isEmpty();
  }

  @Test
  void aDeferredUniqueViolationOfTheCallersOwnIsTheCallersErrorNotAConflictOnTheKey() {
    f.sql("CREATE TABLE IF NOT EXISTS invoices (number text, CONSTRAINT invoices_number UNIQUE (number) DEFERRABLE INITIALLY DEFERRED);"
        + " INSERT INTO invoices VALUES ('INV-1')");
    IdempotencyKey key = newKey();
    AtomicInteger runs = new AtomicInteger();
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      tx.dsl().execute("INSERT INTO invoices VALUES ('INV-1')"); // checked only at COMMIT
      return "invoiced";
    })).hasMessageContaining("invoices_number");
    assertThat(runs).as("not retried as if another copy held the key").hasValue(1);
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.count("SELECT count(*) FROM invoices")).isEqualTo(1);
  }

  @Test
  void aFailingEffectOverAKeyPastItsWindowIsTheEffectsFailureNotAReplayOfTheOldResult() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().claimOrder(ClaimOrder.AT_COMMIT)
        .window(DedupeWindow.of(Duration.ofMillis(300))).build();
    IdempotencyKey key = newKey();
    shortMemory.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "old result");
    f.sql("SELECT pg_sleep(0.4)");
    IOException failure = new IOException("a new intent that fails");
    assertThatThrownBy(() -> otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      throw failure;
    })).isSameAs(failure);
  }

  @Test
  void aFailingEffectOverAnExternalClaimInFlightIsInFlight() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch calling = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    Future<Execution<String>> external = background.submit(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      calling.countDown();
      finish.await(10, TimeUnit.SECONDS);
      return "charged";
    }));
    assertThat(calling.await(10, TimeUnit.SECONDS)).isTrue();
    Execution<String> local = otherProcess.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      throw new IllegalStateException("ran into the external call's effect");
    });
    assertThat(local.inFlight()).isTrue();
    finish.countDown();
    assertThat(external.get(10, TimeUnit.SECONDS).applied()).isTrue();
  }

  @Test
  void underSerializableALoserPastItsReRunsGetsTheWinnersResultNotTheSerializationFailure() throws Exception {
    f.sql("CREATE TABLE IF NOT EXISTS counters (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counters VALUES (1, 0) ON CONFLICT DO NOTHING");
    long before = f.count("SELECT n FROM counters WHERE id = 1");
    IdempotencyKey key = newKey();
    try (var pool = f.db.dataSource(4, "TRANSACTION_SERIALIZABLE")) {
      IdempotentExecutor noReRuns = dev.idem.jdbc.Idem.builder(pool).serializationRetries(0).build().executor()
          .claimOrder(ClaimOrder.AT_COMMIT).build();
      IdempotentExecutor otherNoReRuns = dev.idem.jdbc.Idem.builder(pool).serializationRetries(0).build().executor()
          .claimOrder(ClaimOrder.AT_COMMIT).build();
      CountDownLatch updated = new CountDownLatch(1);
      CountDownLatch finish = new CountDownLatch(1);
      Future<Execution<String>> winner = background.submit(() -> noReRuns.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        tx.dsl().execute("UPDATE counters SET n = n + 1 WHERE id = 1");
        updated.countDown();
        finish.await(10, TimeUnit.SECONDS);
        return "winner";
      }));
      assertThat(updated.await(10, TimeUnit.SECONDS)).isTrue();
      Future<Execution<String>> loser = background.submit(() -> otherNoReRuns.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        tx.dsl().execute("SELECT 1"); // its snapshot starts before the winner commits
        finish.countDown();
        tx.dsl().execute("UPDATE counters SET n = n + 1 WHERE id = 1"); // waits, then 40001
        return "loser";
      }));
      assertThat(winner.get(10, TimeUnit.SECONDS).applied()).isTrue();
      Execution<String> lost = loser.get(10, TimeUnit.SECONDS);
      assertThat(lost.replayed()).isTrue();
      assertThat(lost.value()).isEqualTo("winner");
    }
    assertThat(f.count("SELECT n FROM counters WHERE id = 1")).isEqualTo(before + 1);
  }

  @Test
  void theBuilderRefusesANullClaimOrder() {
    assertThatThrownBy(() -> f.idem.executor().claimOrder(null).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("claimOrder must not be null");
  }
}
