package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Local effects joining the caller's transaction: the savepoint keeps the caller's work safe. */
@IdemTest(poolSize = 6, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE,
    "CREATE TABLE orders (id varchar(100) PRIMARY KEY)",
    "CREATE SEQUENCE sends"})
class JoinedTransactionTest {
  static ExecutorFixture f;
  static IdempotentExecutor executor;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    executor = f.idem.executor().inFlightWait(Duration.ofMillis(200)).build();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("joined", UUID.randomUUID().toString());
  }

  static void order(Connection c, String id) throws Exception {
    try (Statement st = c.createStatement()) {
      st.execute("INSERT INTO orders VALUES ('" + id + "')");
    }
  }

  long orders(String id) {
    return f.count("SELECT count(*) FROM orders WHERE id = '" + id + "'");
  }

  @Test
  void theClaimAndEffectCommitWithTheCallersWork() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      order(c, key.value());
      Execution<String> e = executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 10));
      assertThat(e.applied()).isTrue();
      // Nothing is visible to others before the caller commits.
      assertThat(f.keyRows(key)).isZero();
      assertThat(f.payments(key.value())).isZero();
      c.commit();
    }
    assertThat(orders(key.value())).isEqualTo(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    Execution<String> again = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 10));
    assertThat(again.replayed()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void anEffectThatThrowsIsRolledBackToTheSavepointAndTheCallersTransactionGoesOn() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      order(c, key.value());
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        ExecutorFixture.pay(tx, key.value(), 10);
        // aborts the transaction (PostgreSQL): only the savepoint saves it
        tx.connection().createStatement().execute(VendorSql.divisionByZero(f.db));
        return "never";
      })).isInstanceOf(java.sql.SQLException.class).hasMessageContaining("division by zero");
      order(c, key.value() + "-after"); // the caller's transaction is usable
      c.commit();
    }
    assertThat(orders(key.value())).isEqualTo(1);
    assertThat(orders(key.value() + "-after")).isEqualTo(1);
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  /**
   * A joined call inside another joined call's effect, on the same connection: each has its own
   * savepoint (PostgreSQL stacks savepoints of one name; MariaDB replaces one of the same name, so
   * idem names them by depth there). The inner call commits with the outer; an outer call failing
   * after its inner call succeeded rolls both back, cleanly, and the caller's transaction goes on.
   */
  @Test
  void aJoinedCallInsideAnotherJoinedCallsEffectKeepsEachItsOwnSavepoint() throws Exception {
    IdempotencyKey outer = newKey();
    IdempotencyKey inner = newKey();
    IdempotencyKey failing = newKey();
    IdempotencyKey innerOfFailing = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(executor.execute(c, outer, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        ExecutorFixture.pay(tx, outer.value(), 1);
        assertThat(executor.execute(c, inner, Fingerprint.EMPTY, Codec.utf8(),
            t -> ExecutorFixture.pay(t, inner.value(), 1)).applied()).isTrue();
        return "outer";
      }).applied()).isTrue();
      assertThatThrownBy(() -> executor.execute(c, failing, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        ExecutorFixture.pay(tx, failing.value(), 1);
        executor.execute(c, innerOfFailing, Fingerprint.EMPTY, Codec.utf8(), t -> ExecutorFixture.pay(t, innerOfFailing.value(), 1));
        throw new java.io.IOException("the outer effect fails after its inner call");
      })).isInstanceOf(java.io.IOException.class).satisfies(e -> assertThat(e.getSuppressed()).as("a clean rollback").isEmpty());
      order(c, outer.value()); // the caller's transaction is usable
      c.commit();
    }
    assertThat(f.payments(outer.value())).isEqualTo(1);
    assertThat(f.payments(inner.value())).isEqualTo(1);
    assertThat(f.keyRows(outer)).isEqualTo(1);
    assertThat(f.keyRows(inner)).isEqualTo(1);
    assertThat(f.payments(failing.value())).isZero();
    assertThat(f.payments(innerOfFailing.value())).isZero();
    assertThat(f.keyRows(failing)).isZero();
    assertThat(f.keyRows(innerOfFailing)).isZero();
    assertThat(orders(outer.value())).isEqualTo(1);
  }

  @Test
  void aRollbackOfTheCallersTransactionTakesTheKeyWithIt() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
      c.rollback();
    }
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();
    assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1)).applied()).isTrue();
  }

  @Test
  void aReplayAndAMismatchInsideTheCallersTransactionLeaveItUsable() throws Exception {
    IdempotencyKey key = newKey();
    executor.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      Execution<String> replay = executor.execute(c, key, Fingerprint.of("a"), Codec.utf8(), tx -> "no");
      assertThat(replay.replayed()).isTrue();
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.of("b"), Codec.utf8(), tx -> "no"))
          .isInstanceOf(KeyReuseException.class);
      order(c, key.value());
      c.commit();
    }
    assertThat(orders(key.value())).isEqualTo(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aKeyHeldByAnotherTransactionIsInFlightAndTheCallersTransactionGoesOn() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<Execution<String>> holder = CompletableFuture.supplyAsync(() -> {
      try {
        return executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          claimed.countDown();
          finish.await(10, TimeUnit.SECONDS);
          return ExecutorFixture.pay(tx, key.value(), 1);
        });
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      Execution<String> e = executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> "second");
      assertThat(e).isInstanceOfSatisfying(Execution.InFlight.class,
          i -> assertThat(i.retryAfter()).isEqualTo(Duration.ofSeconds(1)));
      order(c, key.value());
      // the claim's wait bound did not leak (MariaDB: the session's value is the server's default)
      try (Statement st = c.createStatement(); var rs = st.executeQuery(f.maria()
          ? "SELECT @@session.innodb_lock_wait_timeout = @@global.innodb_lock_wait_timeout" : "SELECT current_setting('lock_timeout') = '0'")) {
        rs.next();
        assertThat(rs.getBoolean(1)).isTrue();
      }
      c.commit();
    }
    finish.countDown();
    assertThat(holder.get(10, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(orders(key.value())).isEqualTo(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void insideIdemInTransactionTheOwnedFormJoins() throws Exception {
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> f.idem.useTransaction(tx -> {
      order(tx.connection(), key.value());
      executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), inner -> ExecutorFixture.pay(inner, key.value(), 1));
      throw new IOException("later failure in the caller");
    })).isInstanceOf(IOException.class);
    assertThat(orders(key.value())).isZero();
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void anEffectCallingTheExecutorWithItsOwnKeyIsRefusedAndNothingCommits() throws Exception {
    IdempotentExecutor ordered = f.idem.executor().build();
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> ordered.execute(key, Fingerprint.EMPTY, Codec.utf8(), outer -> {
      ExecutorFixture.pay(outer, key.value(), 1);
      return ordered.execute(key, Fingerprint.EMPTY, Codec.utf8(), inner -> ExecutorFixture.pay(inner, key.value(), 2)).value();
    })).isInstanceOf(IllegalStateException.class).hasMessageContaining("its own key").hasMessageContaining(key.toString());
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();
    // another key inside the effect is a call like any other, and both commit
    IdempotencyKey step = Keys.child(key, "step");
    Execution<String> done = ordered.execute(key, Fingerprint.EMPTY, Codec.utf8(), outer -> {
      ExecutorFixture.pay(outer, key.value(), 1);
      return ordered.execute(step, Fingerprint.EMPTY, Codec.utf8(), inner -> ExecutorFixture.pay(inner, step.value(), 2)).value();
    });
    assertThat(done.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.payments(step.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.keyRows(step)).isEqualTo(1);
  }

  @Test
  void aNestedCallWithTheRunningKeyIsRefusedWhateverFormItTakes() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      // the outer call joins a transaction of the caller's own, not one idem opened; the inner
      // call is the owned form, and the external form
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(),
          outer -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), inner -> "inner").value()))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("its own key");
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(),
          outer -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "called").value()))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("its own key");
      c.commit();
    }
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void anAutoCommitConnectionIsRefused() throws Exception {
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(true);
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> "x"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx is in auto-commit mode");
    }
    assertThat(f.keyRows(key)).isZero();
  }

  /** A joined call on {@code c} of {@code key}'s effect, as a callback or as a statement. */
  @FunctionalInterface
  interface JoinedCall {
    void run(IdempotentExecutor executor, Connection c, IdempotencyKey key) throws Exception;
  }

  /**
   * Under REPEATABLE READ a loser of the race sees a serialization failure, in either form (a
   * statement's loser sends none: its claim, first in the string, fails), and its transaction
   * remains usable. On MariaDB the loser's claim reads the winner's row with a locking read, which
   * under REPEATABLE READ sees the latest committed row: it gets the winner's replay, no failure,
   * and its effect never runs either.
   */
  @ParameterizedTest
  @EnumSource(Form.class)
  void underRepeatableReadALoserSeesSerializationFailureAndItsTransactionRemainsUsable(Form form) throws Exception {
    IdempotencyKey key = newKey();
    IdempotentExecutor patient = f.idem.executor().inFlightWait(Duration.ofSeconds(10)).build();
    long sent = sends();
    try (Connection winner = f.ds.getConnection(); Connection loser = f.ds.getConnection()) {
      winner.setAutoCommit(false);
      loser.setAutoCommit(false);
      loser.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
      try (Statement st = loser.createStatement()) {
        // the loser's snapshot starts here, before the winner commits (InnoDB: at the first read of a table)
        st.execute(f.maria() ? "SELECT count(*) FROM orders" : "SELECT 1");
      }
      form.call.run(patient, winner, key);
      long sentByWinner = sends() - sent;
      int loserSession = LockWaits.pid(loser);
      CompletableFuture<Throwable> lost = CompletableFuture.supplyAsync(() -> {
        try {
          form.call.run(patient, loser, key);
          return null;
        } catch (Throwable t) {
          return t;
        }
      });
      LockWaits.awaitSession(f.db, loserSession); // the loser blocks on the winner's key
      winner.commit();
      Throwable t = lost.get(10, TimeUnit.SECONDS);
      if (f.maria()) {
        assertThat(t).as("MariaDB: the loser is answered from the winner's row").isNull();
      } else {
        assertThat(t).isNotNull();
        assertThat(SqlStates.of(t)).isEqualTo(SqlStates.SERIALIZATION_FAILURE);
      }
      assertThat(sends() - sent).as("the loser's effect never ran").isEqualTo(sentByWinner);
      order(loser, key.value()); // rolled back to the savepoint: still usable
      loser.commit();
      loser.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
    }
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(orders(key.value())).isEqualTo(1);
  }

  /** The effect's two forms; each advances the sequence {@code sends} when it runs. */
  enum Form {
    CALLBACK((executor, c, key) -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      tx.dsl().execute(VendorSql.send(f.db));
      return ExecutorFixture.pay(tx, key.value(), 1);
    })),
    STATEMENTS((executor, c, key) -> executor.execute(c, key, Fingerprint.EMPTY, DSL.query(VendorSql.send(f.db)),
        DSL.query("INSERT INTO payments (request, amount) VALUES (?, 1)", key.value())));

    final JoinedCall call;

    Form(JoinedCall call) {
      this.call = call;
    }
  }

  static long sends() {
    return VendorSql.sends(f.db);
  }
}
