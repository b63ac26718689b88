package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.Racers;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The effect given as statements: the claim, the statements and COMMIT in one round trip. What
 * each kind of repeat gets, and whether a statement ran at all, read from the database: a sequence
 * ({@code sends}) counts every time the statements reached the server, committed or not, because
 * PostgreSQL never rolls a sequence back.
 */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE,
    "CREATE SEQUENCE sends",
    "CREATE TABLE accounts (id varchar(100) PRIMARY KEY, balance int NOT NULL, CONSTRAINT accounts_balance_check CHECK (balance >= 0))"})
class StatementEffectTest {
  static ExecutorFixture f;
  static IdempotentExecutor executor;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    executor = f.idem.executor().window(DedupeWindow.of(Duration.ofHours(1))).inFlightWait(Duration.ofMillis(300)).build();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("merchant-1/payments", UUID.randomUUID().toString());
  }

  /** The payment insert, as a jOOQ statement. */
  static Query pay(String request, int amount) {
    return DSL.insertInto(DSL.table("payments"), DSL.field("request", SQLDataType.CLOB), DSL.field("amount", SQLDataType.INTEGER))
        .values(request, amount);
  }

  /** Counts a send of the statements: a sequence step, which no rollback undoes ({@link VendorSql#send}). */
  static Query counted() {
    return DSL.query(VendorSql.send(f.db));
  }

  static long sends() {
    return VendorSql.sends(f.db);
  }

  @Test
  void aNewKeyCommitsTheStatementsWithTheClaimAndARepeatNeverSendsThem() {
    IdempotencyKey key = newKey();
    Fingerprint fp = Fingerprint.of("pay 100 to bob");
    long before = sends();

    Execution<Void> first = executor.execute(key, fp, counted(), pay(key.value(), 100));
    // Another executor remembers nothing of this key, so its repeat takes the one-trip path and
    // meets the row in the claim; the first executor's repeat is answered by its read.
    IdempotentExecutor forgetful = f.idem.executor().window(DedupeWindow.of(Duration.ofHours(1))).build();
    Execution<Void> second = forgetful.execute(key, fp, counted(), pay(key.value(), 100));
    Execution<Void> third = executor.execute(key, fp, counted(), pay(key.value(), 100));

    assertThat(first).isInstanceOf(Execution.Applied.class);
    assertThat(first.value()).isNull();
    assertThat(second).isInstanceOf(Execution.Replayed.class);
    assertThat(third).isInstanceOf(Execution.Replayed.class);
    assertThat(((Execution.Replayed<Void>) second).age()).isGreaterThanOrEqualTo(Duration.ZERO);
    assertThat(sends() - before).as("statements that reached the server").isEqualTo(1);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "result")).isNull();
    assertThat(f.column(key, VendorSql.microsBetween(f.db, "created_at", "expires_at"))).isEqualTo("3600000000");
    assertThat(f.events.of(IdemEvent.Applied.class, key)).hasSize(1);
    assertThat(f.events.of(IdemEvent.Replayed.class, key)).hasSize(2);
  }

  @Test
  void everyStatementCommitsTogetherAndTheFirstThatFailsRollsBackTheOthersAndTheClaim() {
    String account = UUID.randomUUID().toString();
    f.sql("INSERT INTO accounts VALUES ('" + account + "', 150)");
    IdempotencyKey key = newKey();
    Query debit = DSL.update(DSL.table("accounts"))
        .set(DSL.field("balance", SQLDataType.INTEGER), DSL.field("balance", SQLDataType.INTEGER).minus(100))
        .where(DSL.field("id", SQLDataType.CLOB).eq(account));

    assertThat(executor.execute(key, Fingerprint.EMPTY, pay(key.value(), 100), debit)).isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.count("SELECT balance FROM accounts WHERE id = '" + account + "'")).isEqualTo(50);

    // The second debit breaks the balance's CHECK: its payment row goes too, and the key stays free.
    IdempotencyKey overdraft = newKey();
    assertThatThrownBy(() -> executor.execute(overdraft, Fingerprint.EMPTY, pay(overdraft.value(), 100), debit))
        .isInstanceOf(DataAccessException.class)
        .hasMessageContaining("accounts_balance_check");
    assertThat(f.payments(overdraft.value())).isZero();
    assertThat(f.keyRows(overdraft)).isZero();
    assertThat(f.count("SELECT balance FROM accounts WHERE id = '" + account + "'")).isEqualTo(50);
    assertThat(f.events.of(IdemEvent.Applied.class, overdraft)).isEmpty();

    // A retry that can succeed runs them.
    f.sql("UPDATE accounts SET balance = 500 WHERE id = '" + account + "'");
    assertThat(executor.execute(overdraft, Fingerprint.EMPTY, pay(overdraft.value(), 100), debit))
        .isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(overdraft.value())).isEqualTo(1);
    assertThat(f.count("SELECT balance FROM accounts WHERE id = '" + account + "'")).isEqualTo(400);
  }

  @Test
  void aRepeatWithAnotherFingerprintIsRefusedWithoutSendingTheStatements() {
    IdempotencyKey key = newKey();
    executor.execute(key, Fingerprint.of("pay 100"), pay(key.value(), 100));
    String row = f.keyRow(key);
    IdempotentExecutor forgetful = f.idem.executor().build();
    long before = sends();

    assertThatThrownBy(() -> forgetful.execute(key, Fingerprint.of("pay 900"), counted(), pay(key.value(), 900)))
        .isInstanceOf(KeyReuseException.class);
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.of("pay 900"), counted(), pay(key.value(), 900)))
        .isInstanceOf(KeyReuseException.class);

    assertThat(sends()).isEqualTo(before);
    assertThat(f.keyRow(key)).isEqualTo(row);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aKeyFirstCompletedByACallbackIsReplayedWithANullValue() throws Exception {
    IdempotencyKey key = newKey();
    executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 100));
    Execution<Void> repeat = f.idem.executor().build().execute(key, Fingerprint.EMPTY, pay(key.value(), 100));
    assertThat(repeat).isInstanceOf(Execution.Replayed.class);
    assertThat(repeat.value()).isNull();
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aRowPastItsWindowIsClaimedAgainAndTheStatementsRun() throws Exception {
    IdempotentExecutor brief = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(1))).build();
    IdempotencyKey key = newKey();
    brief.execute(key, Fingerprint.of("first"), pay(key.value(), 1));
    f.awaitPastWindow(key);
    // Another request under the key after its window: a new intent, whatever its fingerprint.
    Execution<Void> again = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(1))).build()
        .execute(key, Fingerprint.of("second"), pay(key.value(), 2));
    assertThat(again).isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(key.value())).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, VendorSql.hex(f.db, "fingerprint"))).as("the new intent's request")
        .isEqualTo(Fingerprint.of("second").hex().substring(0, 32));
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void sixteenThreadsRacingOneKeyCommitOneEffectAndTheLosersNeverSendTheirStatements(String isolation) throws Exception {
    IdempotencyKey key = IdempotencyKey.of("race", UUID.randomUUID().toString());
    long before = sends();
    DataSource ds = Racers.pool(f.db, 16, isolation);
    IdempotentExecutor racing = Idem.builder(ds).retries(RetryBudget.NONE).build().executor()
        .inFlightWait(Duration.ofSeconds(20)).build();
    List<Execution<Void>> results = Race.together(16, i -> racing.execute(key, Fingerprint.EMPTY,
        counted(), pay(key.value(), 100), DSL.query(LockWaits.hold(f.db, 15)))); // holds the key until the others wait on it
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).filteredOn(Execution::replayed).hasSize(15);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    // The losers waited on the key's index entry, then failed their claim: their statements never ran.
    assertThat(sends() - before).isEqualTo(1);
  }

  @Test
  void aCopyPastTheWaitBoundIsToldInFlightAndALaterRetryGetsTheReplay() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture<Execution<String>> first = CompletableFuture.supplyAsync(() -> {
      try {
        return executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          String id = ExecutorFixture.pay(tx, key.value(), 100);
          claimed.countDown();
          release.await();
          return id;
        });
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
    long before = sends();

    Execution<Void> copy = f.idem.executor().inFlightWait(Duration.ofMillis(200)).build()
        .execute(key, Fingerprint.EMPTY, counted(), pay(key.value(), 100));
    assertThat(copy).isInstanceOf(Execution.InFlight.class);
    assertThat(sends()).isEqualTo(before);

    release.countDown();
    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(Execution.Applied.class);
    assertThat(f.idem.executor().build().execute(key, Fingerprint.EMPTY, counted(), pay(key.value(), 100)))
        .isInstanceOf(Execution.Replayed.class);
    assertThat(sends()).isEqualTo(before);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void theStatementsWaitOnLocksAsTheCallerSetNotAsTheClaimsBound() throws Exception {
    // The claim bounds its own wait (inFlightWait, 300 ms here) and sets the caller's lock_timeout
    // back once its row is in: a statement that waits longer on a row lock of the caller's is not
    // mistaken for a copy in flight.
    String account = UUID.randomUUID().toString();
    f.sql("INSERT INTO accounts VALUES ('" + account + "', 100)");
    IdempotencyKey key = newKey();
    try (Connection holder = f.ds.getConnection(); Statement st = holder.createStatement()) {
      holder.setAutoCommit(false);
      st.execute("SELECT * FROM accounts WHERE id = '" + account + "' FOR UPDATE");
      CompletableFuture<Void> unlock = CompletableFuture.runAsync(() -> {
        try {
          // the statement, well past the claim's 300 ms (MariaDB: its whole second)
          LockWaits.awaitWaitedFor(f.db, Duration.ofMillis(f.maria() ? 1500 : 500));
          holder.commit();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      Execution<Void> e = executor.execute(key, Fingerprint.EMPTY, pay(key.value(), 1),
          DSL.query("UPDATE accounts SET balance = balance + 1 WHERE id = ?", account));
      unlock.get(10, TimeUnit.SECONDS);
      assertThat(e).isInstanceOf(Execution.Applied.class);
    }
    assertThat(f.count("SELECT balance FROM accounts WHERE id = '" + account + "'")).isEqualTo(101);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void aDeferredCheckFailingAtCommitRollsBackTheStatementsAndTheClaim() {
    Assumptions.assumeFalse(f.maria(), "PostgreSQL only: MariaDB has no deferrable constraints");
    f.sql("CREATE TABLE IF NOT EXISTS deferred_once (v text, CONSTRAINT deferred_once_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)");
    String v = UUID.randomUUID().toString();
    IdempotencyKey key = newKey();
    Query twice = DSL.query("INSERT INTO deferred_once VALUES (?), (?)", v, v);
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, pay(key.value(), 1), twice))
        .isInstanceOf(DataAccessException.class)
        .hasMessageContaining("deferred_once_v");
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.count("SELECT count(*) FROM deferred_once WHERE v = '" + v + "'")).isZero();
  }

  @Test
  void insideIdemInTransactionTheStatementsJoinAndGoWithTheCallersRollback() throws Exception {
    IdempotencyKey kept = newKey();
    IdempotencyKey dropped = newKey();
    f.idem.useTransaction(tx -> {
      assertThat(executor.execute(kept, Fingerprint.EMPTY, pay(kept.value(), 1))).isInstanceOf(Execution.Applied.class);
      // a repeat inside the same transaction sees the row it wrote
      assertThat(executor.execute(kept, Fingerprint.EMPTY, counted())).isInstanceOf(Execution.Replayed.class);
    });
    assertThatThrownBy(() -> f.idem.useTransaction(tx -> {
      executor.execute(dropped, Fingerprint.EMPTY, pay(dropped.value(), 1));
      throw new IllegalStateException("the caller changes its mind");
    })).hasMessage("the caller changes its mind");
    assertThat(f.payments(kept.value())).isEqualTo(1);
    assertThat(f.keyRows(kept)).isEqualTo(1);
    assertThat(f.payments(dropped.value())).isZero();
    assertThat(f.keyRows(dropped)).isZero();
  }

  @Test
  void joinedAFailingStatementIsRolledBackToTheSavepointAndTheCallersWorkCommits() throws Exception {
    String order = UUID.randomUUID().toString();
    IdempotencyKey failing = newKey();
    IdempotencyKey repeated = newKey();
    executor.execute(repeated, Fingerprint.EMPTY, pay(repeated.value(), 1));
    long before = sends();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 7)");
      }
      assertThatThrownBy(() -> executor.execute(c, failing, Fingerprint.EMPTY, pay(failing.value(), 1),
          DSL.query(VendorSql.divisionByZero(f.db)))).isInstanceOf(DataAccessException.class).hasMessageContaining("division by zero");
      // a repeat of a completed key, met by the claim sent with the statements
      assertThat(f.idem.executor().build().execute(c, repeated, Fingerprint.EMPTY, counted(), pay(repeated.value(), 1)))
          .isInstanceOf(Execution.Replayed.class);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 8)");
      }
      c.commit();
    }
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.payments(failing.value())).isZero();
    assertThat(f.keyRows(failing)).isZero();
    assertThat(f.payments(repeated.value())).isEqualTo(1);
    assertThat(sends()).isEqualTo(before);
  }

  @Test
  void manyStatementsGoInOneString() {
    IdempotencyKey key = newKey();
    Query[] twenty = new Query[20];
    for (int i = 0; i < twenty.length; i++) {
      twenty[i] = pay(key.value(), i);
    }
    assertThat(executor.execute(key, Fingerprint.EMPTY, twenty)).isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(key.value())).isEqualTo(20);
    assertThat(f.count("SELECT sum(amount) FROM payments WHERE request = '" + key.value() + "'")).isEqualTo(190);
  }

  @Test
  void valuesOfEveryCommonTypeAreBoundByJooqInTheOrderItRendersThem() {
    Assumptions.assumeFalse(f.maria(), "PostgreSQL only: PostgreSQL's types (text[] arrays, jsonb, timestamptz, bytea);"
        + " MariaDB has no arrays");
    f.sql("CREATE TABLE IF NOT EXISTS typed (k text PRIMARY KEY, id uuid, at timestamptz, day date, price numeric(12,2),"
        + " doc jsonb, tags text[], note text, raw bytea)");
    IdempotencyKey key = newKey();
    UUID id = UUID.randomUUID();
    java.time.OffsetDateTime at = java.time.OffsetDateTime.parse("2026-12-03T17:05:06.123456Z");
    Query insert = DSL.insertInto(DSL.table("typed"))
        .set(DSL.field("k", SQLDataType.CLOB), key.value())
        .set(DSL.field("id", SQLDataType.UUID), id)
        .set(DSL.field("at", SQLDataType.TIMESTAMPWITHTIMEZONE), at)
        .set(DSL.field("day", SQLDataType.LOCALDATE), java.time.LocalDate.of(2026, 12, 3))
        .set(DSL.field("price", SQLDataType.NUMERIC(12, 2)), new java.math.BigDecimal("1234.50"))
        .set(DSL.field("doc", SQLDataType.JSONB), org.jooq.JSONB.valueOf("{\"a\": [1, 2]}"))
        .set(DSL.field("tags", SQLDataType.CLOB.array()), new String[] {"x", "y, z"})
        .set(DSL.field("note", SQLDataType.CLOB), (String) null)
        .set(DSL.field("raw", SQLDataType.BLOB), new byte[] {0, 1, (byte) 0xff});
    Query touch = DSL.update(DSL.table("typed"))
        .set(DSL.field("note", SQLDataType.CLOB), "it's; \"quoted\" -- not a comment")
        .where(DSL.field("k", SQLDataType.CLOB).eq(key.value()));

    assertThat(executor.execute(key, Fingerprint.EMPTY, insert, touch)).isInstanceOf(Execution.Applied.class);

    assertThat(f.count("SELECT count(*) FROM typed WHERE k = '" + key.value() + "' AND id = '" + id + "'"
        + " AND at = '2026-12-03T17:05:06.123456Z' AND day = '2026-12-03' AND price = 1234.50"
        + " AND doc = '{\"a\": [1, 2]}'::jsonb AND tags = ARRAY['x', 'y, z'] AND raw = '\\x0001ff'::bytea"
        + " AND note = 'it''s; \"quoted\" -- not a comment'")).isEqualTo(1);
  }

  /** A statement jOOQ renders but cannot bind: a value of a type it has no binding for. */
  static final Query UNBINDABLE = DSL.query("insert into payments (request, amount) values ({0}, 1)", DSL.val(new Object()));

  @Test
  void aStatementJooqCannotBindIsRefusedBeforeAnySqlAndTheCallersTransactionGoesOn() throws Exception {
    String order = UUID.randomUUID().toString();
    IdempotencyKey owned = newKey();
    assertThatThrownBy(() -> executor.execute(owned, Fingerprint.EMPTY, pay(owned.value(), 1), UNBINDABLE))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("statements");
    IdempotencyKey outer = newKey();
    IdempotencyKey inner = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 1)");
      }
      assertThatThrownBy(() -> executor.execute(c, inner, Fingerprint.EMPTY, UNBINDABLE))
          .isInstanceOf(IllegalArgumentException.class);
      // Nested in a joined call, whose savepoint has the same name: that call's work stays.
      Execution<Object> e = executor.execute(c, outer, Fingerprint.EMPTY, Codec.none(), tx -> {
        ExecutorFixture.pay(tx, outer.value(), 1);
        assertThatThrownBy(() -> executor.execute(c, inner, Fingerprint.EMPTY, pay(inner.value(), 1), UNBINDABLE))
            .isInstanceOf(IllegalArgumentException.class);
        return null;
      });
      assertThat(e).isInstanceOf(Execution.Applied.class);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 2)");
      }
      c.commit();
    }
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.payments(outer.value())).isEqualTo(1);
    assertThat(f.keyRows(outer)).isEqualTo(1);
    assertThat(f.keyRows(inner)).isZero();
    assertThat(f.payments(inner.value())).isZero();
    assertThat(f.keyRows(owned)).isZero();
  }

  @Test
  void aStatementEndingInALineCommentIsAppliedAndDoesNotSwallowWhatFollows() {
    IdempotencyKey key = newKey();
    Query commented = DSL.query("insert into payments (request, amount) values (?, 1) -- the charge", key.value());
    assertThat(executor.execute(key, Fingerprint.EMPTY, commented, pay(key.value(), 2))).isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(key.value())).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void statementsWithMoreValuesThanOneStringMayBindAreSentWithTheirValuesInlined() {
    IdempotencyKey key = newKey();
    Query[] thirds = new Query[3];
    for (int t = 0; t < 3; t++) {
      var insert = DSL.insertInto(DSL.table("payments"), DSL.field("request", SQLDataType.CLOB), DSL.field("amount", SQLDataType.INTEGER))
          .values(key.value(), t * 12_000);
      for (int i = 1; i < 12_000; i++) {
        insert = insert.values(key.value(), t * 12_000 + i);
      }
      thirds[t] = insert;
    }
    // 72,000 values: each statement within what PostgreSQL binds, the three beyond what one string may carry
    assertThat(executor.execute(key, Fingerprint.EMPTY, thirds)).isInstanceOf(Execution.Applied.class);
    assertThat(f.payments(key.value())).isEqualTo(36_000);
    assertThat(f.count("SELECT sum(amount) FROM payments WHERE request = '" + key.value() + "'")).isEqualTo(647_982_000L);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  /**
   * pgjdbc's autosave rolls a failed string back to a savepoint of its own, set before the string:
   * a savepoint set inside the string goes with it. Joined calls still answer repeats, copies in
   * flight and failures as without it, in both forms, and the caller's transaction goes on.
   */
  @ParameterizedTest
  @ValueSource(strings = {"autosave=always", "autosave=always&cleanupSavepoints=true", "autosave=conservative"})
  void underAutosaveJoinedCallsAnswerRepeatsCopiesInFlightAndFailuresAndTheCallerGoesOn(String params) throws Exception {
    Assumptions.assumeFalse(f.maria(), "PostgreSQL only: pgjdbc's autosave");
    IdempotencyKey done = newKey();
    IdempotencyKey failing = newKey();
    IdempotencyKey held = newKey();
    IdempotencyKey fresh = newKey();
    String order = UUID.randomUUID().toString();
    executor.execute(done, Fingerprint.EMPTY, pay(done.value(), 1));
    long before = sends();
    try (HikariDataSource autosave = f.db.dataSourceWithDriverParams(1, params); Connection holder = f.ds.getConnection()) {
      holder.setAutoCommit(false);
      executor.execute(holder, held, Fingerprint.EMPTY, pay(held.value(), 1)); // held, uncommitted
      try (Connection c = autosave.getConnection()) {
        c.setAutoCommit(false);
        try (Statement st = c.createStatement()) {
          st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 1)");
        }
        IdempotentExecutor forgetful = f.idem.executor().inFlightWait(Duration.ofMillis(200)).build();
        if (Driver.losesSavepoints(c)) {
          // pgjdbc before 42.7.10 under autosave=always: refused before anything is sent
          assertThatThrownBy(() -> forgetful.execute(c, fresh, Fingerprint.EMPTY, pay(fresh.value(), 1)))
              .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("42.7.10");
          assertThatThrownBy(() -> forgetful.execute(c, fresh, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, fresh.value(), 1)))
              .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("42.7.10");
          c.commit();
          c.setAutoCommit(true);
          holder.rollback();
          holder.setAutoCommit(true);
          assertThat(f.payments(order)).isEqualTo(1);
          assertThat(f.keyRows(fresh)).isZero();
          assertThat(f.payments(fresh.value())).isZero();
          return;
        }
        assertThat(forgetful.execute(c, done, Fingerprint.EMPTY, counted(), pay(done.value(), 1)))
            .isInstanceOf(Execution.Replayed.class);
        assertThat(forgetful.execute(c, held, Fingerprint.EMPTY, counted(), pay(held.value(), 1)))
            .isInstanceOf(Execution.InFlight.class);
        assertThat(forgetful.execute(c, held, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, held.value(), 1)))
            .isInstanceOf(Execution.InFlight.class);
        assertThatThrownBy(() -> forgetful.execute(c, failing, Fingerprint.EMPTY, pay(failing.value(), 1), DSL.query(VendorSql.divisionByZero(f.db))))
            .isInstanceOf(DataAccessException.class).hasMessageContaining("division by zero")
            .satisfies(e -> assertThat(e.getSuppressed()).isEmpty());
        assertThat(forgetful.execute(c, fresh, Fingerprint.EMPTY, pay(fresh.value(), 1))).isInstanceOf(Execution.Applied.class);
        try (Statement st = c.createStatement()) {
          st.execute("INSERT INTO payments (request, amount) VALUES ('" + order + "', 2)");
        }
        c.commit();
        c.setAutoCommit(true);
      }
      holder.rollback();
      holder.setAutoCommit(true);
    }
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.payments(done.value())).isEqualTo(1);
    assertThat(f.payments(failing.value())).isZero();
    assertThat(f.keyRows(failing)).isZero();
    assertThat(f.payments(held.value())).isZero();
    assertThat(f.payments(fresh.value())).isEqualTo(1);
    assertThat(f.keyRows(fresh)).isEqualTo(1);
    assertThat(sends()).isEqualTo(before);
  }

  /** PostgreSQL only: MariaDB has no aborted transactions (a failed statement is undone alone). */
  @Test
  void inAnAbortedTransactionAJoinedCallIsRefusedAndSendsNothing() throws Exception {
    Assumptions.assumeFalse(f.maria(), "PostgreSQL only: its aborted transactions (MariaDB undoes a failed statement alone)");
    IdempotencyKey key = newKey();
    try (Connection c = f.ds.getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("select 1 / 0");
      } catch (java.sql.SQLException swallowed) {
        // the caller's transaction is aborted now
      }
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, pay(key.value(), 1)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx").hasMessageContaining("aborted");
      assertThatThrownBy(() -> executor.execute(c, key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aborted");
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "null   | statements must not be null",
      "empty  | statements must hold at least one statement",
      "holed  | statements[1] is null"})
  void badStatementsAreRefusedNamingTheArgumentAndNothingIsWritten(String shape, String message) {
    IdempotencyKey key = newKey();
    Query[] statements = switch (shape.trim()) {
      case "null" -> null;
      case "empty" -> new Query[0];
      default -> new Query[] {pay(key.value(), 1), null};
    };
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, statements))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message.trim());
    assertThatThrownBy(() -> f.idem.useTransaction(tx -> executor.execute(tx.connection(), key, Fingerprint.EMPTY, statements)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message.trim());
    assertThatThrownBy(() -> executor.execute(null, Fingerprint.EMPTY, pay(key.value(), 1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("key");
    assertThatThrownBy(() -> executor.execute((Connection) null, key, Fingerprint.EMPTY, pay(key.value(), 1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    assertThat(f.keyRows(key)).isZero();
    assertThat(f.payments(key.value())).isZero();
  }
}
