package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.tx.TransactionBinding;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A framework's transaction, found through a {@link dev.idem.jdbc.tx.TransactionBinding}: idem's
 * calls without a connection join it on its connection, so its rollback takes idem's rows with
 * the framework's own. The "framework" here is a thread-local connection with auto-commit off, as
 * Spring's DataSourceTransactionManager keeps one.
 */
@IdemTest(poolSize = 4, sql = "CREATE TABLE payments (request text NOT NULL, amount int NOT NULL)")
class TransactionBindingTest {
  static TestDatabase db;
  static DataSource ds;
  static final ThreadLocal<Connection> framework = new ThreadLocal<>();
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    idem = Idem.builder(ds).transactionBinding(framework::get).build();
  }

  @FunctionalInterface
  interface Work<T> {
    T run(Connection c) throws Exception;
  }

  /** Runs {@code work} in the framework's transaction, then commits it or rolls it back. */
  static <T> T inFramework(boolean commit, Work<T> work) throws Exception {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      framework.set(c);
      try {
        T result = work.run(c);
        if (commit) {
          c.commit();
        } else {
          c.rollback();
        }
        return result;
      } finally {
        framework.remove();
        c.setAutoCommit(true);
      }
    }
  }

  static void pay(Connection c, String request) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO payments VALUES (?, 1)")) {
      ps.setString(1, request);
      ps.execute();
    }
  }

  long payments(String request) {
    return db.count("SELECT count(*) FROM payments WHERE request = ?", request);
  }

  /**
   * The lost payment: inside the framework's transaction, the executor's call without a
   * connection used to commit the key on a connection of its own; after the framework rolled back,
   * a retry was Replayed and the payment row was gone. With the binding, the key goes with it.
   */
  @Test
  void anExecutorCallInsideTheFrameworksTransactionRollsBackWithIt() throws Exception {
    String request = "bound-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("binding", request);
    IdempotentExecutor payments = idem.executor().build();
    Execution<String> first = inFramework(false, c -> payments.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      assertThat(tx.connection()).isSameAs(c); // the framework's connection, not one of idem's
      pay(tx.connection(), request);
      return "paid";
    }));
    assertThat(first.applied()).isTrue();
    assertThat(payments(request)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", request)).isZero();

    Execution<String> retry = inFramework(true, c -> payments.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      pay(tx.connection(), request);
      return "paid";
    }));
    assertThat(retry.applied()).as("the retry runs: nothing of the first attempt committed").isTrue();
    assertThat(payments(request)).isEqualTo(1);
    assertThat(inFramework(true, c -> payments.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "again")).replayed()).isTrue();
    assertThat(payments(request)).isEqualTo(1);
  }

  @Test
  void theInboxTheOutboxAndStatementsJoinTheFrameworksTransactionToo() throws Exception {
    String id = "bound-" + UUID.randomUUID();
    Inbox inbox = idem.inbox("binding").build();
    inFramework(false, c -> {
      pay(c, id);
      assertThat(inbox.receive(id, tx -> pay(tx.connection(), id)).applied()).isTrue();
      idem.outbox().enqueue(NewMessage.of("bound", id.getBytes()));
      idem.executor().build().execute(IdempotencyKey.of("binding", id), Fingerprint.EMPTY,
          org.jooq.impl.DSL.query("INSERT INTO payments VALUES (?, 1)", id));
      return null;
    });
    assertThat(payments(id)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'binding' AND message_id = ?", id)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE topic = 'bound'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", id)).isZero();

    inFramework(true, c -> inbox.receive(id, tx -> pay(tx.connection(), id)));
    assertThat(inFramework(true, c -> inbox.receive(id, tx -> pay(tx.connection(), id))).replayed()).isTrue();
    assertThat(payments(id)).isEqualTo(1);
  }

  /** With no framework transaction open on the thread, the binding answers null and idem owns its own. */
  @Test
  void outsideTheFrameworksTransactionIdemOwnsItsOwn() throws SQLException {
    String request = "alone-" + UUID.randomUUID();
    Execution<String> e = idem.executor().build().execute(IdempotencyKey.of("binding", request), Fingerprint.EMPTY,
        Codec.utf8(), tx -> {
          pay(tx.connection(), request);
          return "paid";
        });
    assertThat(e.applied()).isTrue();
    assertThat(payments(request)).isEqualTo(1);
  }

  /**
   * A binding that hands idem a connection in auto-commit is refused before anything is written,
   * by the executor and the inbox alike, rather than failing on PostgreSQL's "SAVEPOINT can only be
   * used in transaction blocks" (or committing the key alone).
   */
  @Test
  void aBindingThatHandsOutAnAutoCommitConnectionIsRefusedBeforeAnythingIsWritten() throws SQLException {
    String id = "autocommit-" + UUID.randomUUID();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(true);
      Idem loose = Idem.builder(ds).transactionBinding(() -> c).build();
      assertThatThrownBy(() -> loose.executor().build().execute(IdempotencyKey.of("binding", id), Fingerprint.EMPTY,
          Codec.utf8(), tx -> {
            pay(tx.connection(), id);
            return "paid";
          }))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("TransactionBinding")
          .hasMessageContaining("auto-commit")
          .hasMessageContaining("return the connection of an open transaction");
      assertThatThrownBy(() -> loose.inbox("binding").build().receive(id, tx -> pay(tx.connection(), id)))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("auto-commit");
    }
    assertThat(payments(id)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", id)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'binding' AND message_id = ?", id)).isZero();
  }

  /**
   * Outside any framework transaction idem lends its own to the binding around the caller's code:
   * a veto before the commit rolls the effect and the key back, and every run ends the lending.
   */
  @Test
  void idemLendsItsOwnTransactionToTheBindingAndAVetoRollsItBack() throws SQLException {
    String id = "lent-" + UUID.randomUUID();
    List<String> seen = new ArrayList<>();
    boolean[] veto = {true};
    TransactionBinding lending = new TransactionBinding() {
      @Override
      public Connection currentConnection() {
        return null;
      }

      @Override
      public Lent ownTransaction(Connection connection) {
        seen.add("begin");
        return new Lent() {
          @Override
          public void beforeCommit() {
            if (veto[0]) {
              throw new IllegalStateException("rollback-only");
            }
          }

          @Override
          public void end(Outcome outcome) {
            seen.add(outcome.toString());
          }
        };
      }
    };
    IdempotentExecutor payments = Idem.builder(ds).transactionBinding(lending).build().executor().build();
    IdempotencyKey key = IdempotencyKey.of("binding", id);
    assertThatThrownBy(() -> payments.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      pay(tx.connection(), id);
      return "paid";
    })).hasMessage("rollback-only");
    assertThat(payments(id)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", id)).isZero();
    veto[0] = false;
    assertThat(payments.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      pay(tx.connection(), id);
      return "paid";
    }).applied()).isTrue();
    assertThat(payments(id)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", id)).isEqualTo(1);
    assertThat(seen).containsExactly("begin", "ROLLED_BACK", "begin", "COMMITTED");
  }

  /** A binding that records how each lent transaction ended. */
  static TransactionBinding recording(List<TransactionBinding.Lent.Outcome> ends) {
    return new TransactionBinding() {
      @Override
      public Connection currentConnection() {
        return null;
      }

      @Override
      public Lent ownTransaction(Connection connection) {
        return ends::add;
      }
    };
  }

  /**
   * {@code ds}, whose connections' {@code commit()} first commits and then throws {@code failure}:
   * a commit that reached PostgreSQL and whose answer was lost (or that came after the work's own
   * statement ending in COMMIT).
   */
  static DataSource commitThenFail(SQLException failure) {
    return (DataSource) java.lang.reflect.Proxy.newProxyInstance(DataSource.class.getClassLoader(),
        new Class<?>[] {DataSource.class}, (p, m, args) -> {
          Object real = m.invoke(ds, args);
          if (!m.getName().equals("getConnection")) {
            return real;
          }
          Connection c = (Connection) real;
          return java.lang.reflect.Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[] {Connection.class},
              (cp, cm, cargs) -> {
                Object r;
                try {
                  r = cm.invoke(c, cargs);
                } catch (java.lang.reflect.InvocationTargetException e) {
                  throw e.getCause();
                }
                if (cm.getName().equals("commit")) {
                  throw failure;
                }
                return r;
              });
        });
  }

  /**
   * The binding hears how the transaction really ended: committed when the executor's last
   * statement committed (whatever failed after), unknown when the connection failed during the
   * commit, rolled back when PostgreSQL answered with an error. Read from the database each time.
   */
  @Test
  void theBindingIsToldTheActualOutcomeOfTheCommit() {
    List<TransactionBinding.Lent.Outcome> ends = new ArrayList<>();
    SQLException lost = new SQLException("I/O error: the answer to COMMIT was lost", "08006");
    IdempotentExecutor stores = Idem.builder(commitThenFail(lost)).transactionBinding(recording(ends)).build().executor().build();

    // The result is stored and committed by the executor's last statement; the failure comes after.
    String stored = "stored-" + UUID.randomUUID();
    assertThatThrownBy(() -> stores.execute(IdempotencyKey.of("binding", stored), Fingerprint.EMPTY, Codec.utf8(), tx -> {
      pay(tx.connection(), stored);
      return "paid";
    })).hasMessageContaining("the answer to COMMIT was lost");
    assertThat(payments(stored)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", stored)).isEqualTo(1);
    assertThat(ends).containsExactly(TransactionBinding.Lent.Outcome.COMMITTED);

    // Nothing stored: idem's own commit() is the commit, and its answer was lost. (On MariaDB a
    // claim's commit is the statement that finds the claim still there, as the stored result's
    // above: a transaction of idem's own with no claim stands for it.)
    ends.clear();
    String unknown = "unknown-" + UUID.randomUUID();
    Idem losing = Idem.builder(commitThenFail(lost)).transactionBinding(recording(ends)).build();
    assertThatThrownBy(() -> {
      if (db.vendor() == TestDatabase.Vendor.MARIADB) {
        losing.inTransaction(tx -> {
          pay(tx.connection(), unknown);
          return null;
        });
      } else {
        stores.execute(IdempotencyKey.of("binding", unknown), Fingerprint.EMPTY, Codec.none(), tx -> {
          pay(tx.connection(), unknown);
          return null;
        });
      }
    }).hasMessageContaining("the answer to COMMIT was lost");
    assertThat(payments(unknown)).as("it did commit: hence UNKNOWN, not ROLLED_BACK").isEqualTo(1);
    assertThat(ends).containsExactly(TransactionBinding.Lent.Outcome.UNKNOWN);

    // PostgreSQL's own answer to the commit is an error: nothing is committed. (PostgreSQL only:
    // MariaDB has no deferred constraints, so no error waits for the commit there.)
    if (db.vendor() == TestDatabase.Vendor.MARIADB) {
      return;
    }
    ends.clear();
    db.execute("CREATE TABLE IF NOT EXISTS deferred (id text, CONSTRAINT one UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)");
    IdempotentExecutor plain = Idem.builder(ds).transactionBinding(recording(ends)).build().executor().build();
    String refused = "refused-" + UUID.randomUUID();
    assertThatThrownBy(() -> plain.execute(IdempotencyKey.of("binding", refused), Fingerprint.EMPTY, Codec.none(), tx -> {
      pay(tx.connection(), refused);
      try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO deferred VALUES (?), (?)")) {
        ps.setString(1, refused);
        ps.setString(2, refused);
        ps.executeUpdate(); // the unique violation surfaces at COMMIT
      }
      return null;
    })).hasMessageContaining("could not commit");
    assertThat(payments(refused)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.scope = 'binding' AND k.key = ?", refused)).isZero();
    assertThat(ends).containsExactly(TransactionBinding.Lent.Outcome.ROLLED_BACK);
  }

  /** idem's transactions that run none of the caller's code are not lent: the statements form's. */
  @Test
  void statementsSentWithTheirClaimAreNotLent() {
    List<TransactionBinding.Lent.Outcome> ends = new ArrayList<>();
    Idem lending = Idem.builder(ds).transactionBinding(recording(ends)).build();
    IdempotentExecutor payments = lending.executor().build();
    String id = "statements-" + UUID.randomUUID();
    org.jooq.DSLContext dsl = org.jooq.impl.DSL.using(org.jooq.SQLDialect.POSTGRES);
    Execution<Void> done = payments.execute(IdempotencyKey.of("binding", id), Fingerprint.EMPTY,
        dsl.insertInto(org.jooq.impl.DSL.table("payments"), org.jooq.impl.DSL.field("request"), org.jooq.impl.DSL.field("amount"))
            .values(id, 1));
    assertThat(done.applied()).isTrue();
    assertThat(payments(id)).isEqualTo(1);
    assertThat(ends).isEmpty();
  }
}
