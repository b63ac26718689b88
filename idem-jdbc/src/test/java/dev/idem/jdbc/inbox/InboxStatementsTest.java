package dev.idem.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.Racers;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The consumer's effect given as statements: the id's claim, the statements and COMMIT in one
 * round trip. A sequence ({@code sends}) counts every time the statements reached the server,
 * committed or not: PostgreSQL never rolls a sequence back.
 */
@IdemTest(poolSize = 6, sql = {"CREATE TABLE charges (message_id text NOT NULL, amount int NOT NULL,"
    + " CONSTRAINT charges_amount_check CHECK (amount > 0))",
    "CREATE SEQUENCE sends"})
class InboxStatementsTest {
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

  static String newId() {
    return UUID.randomUUID().toString();
  }

  static Query charge(String id, int amount) {
    return DSL.insertInto(DSL.table("charges"), DSL.field("message_id", SQLDataType.CLOB), DSL.field("amount", SQLDataType.INTEGER))
        .values(id, amount);
  }

  static Query counted() {
    return DSL.query(VendorSql.send(db));
  }

  static long sends() {
    return VendorSql.sends(db);
  }

  static long charges(String id) {
    return db.count("SELECT count(*) FROM charges WHERE message_id = '" + id + "'");
  }

  static long inboxRows(String consumer, String id) {
    return db.count("SELECT count(*) FROM idem_inbox WHERE consumer = '" + consumer + "' AND message_id = '" + id + "'");
  }

  /** A new inbox of the consumer: it remembers no id, so its copies meet the row in the claim. */
  static Inbox forgetful(String consumer) {
    return idem.inbox(consumer).window(DedupeWindow.of(Duration.ofDays(8))).build();
  }

  @Test
  void aNewMessageCommitsTheStatementsWithItsClaimAndACopyNeverSendsThem() {
    String id = newId();
    long before = sends();
    assertThat(billing.receive(id, counted(), charge(id, 10))).matches(Execution::applied);
    assertThat(forgetful("billing").receive(id, counted(), charge(id, 10))).matches(Execution::replayed);
    assertThat(billing.receive(id, counted(), charge(id, 10))).matches(Execution::replayed);
    assertThat(sends() - before).isEqualTo(1);
    assertThat(charges(id)).isEqualTo(1);
    assertThat(inboxRows("billing", id)).isEqualTo(1);
    // another consumer has ids of its own
    assertThat(forgetful("shipping").receive(id, charge(id, 10))).matches(Execution::applied);
    assertThat(charges(id)).isEqualTo(2);
  }

  @Test
  void aFailingStatementRollsBackTheOthersAndTheClaimAndARedeliveryRunsThemAgain() {
    String id = newId();
    assertThatThrownBy(() -> billing.receive(id, charge(id, 10), charge(id, 0)))
        .isInstanceOf(DataAccessException.class).hasMessageContaining("charges_amount_check");
    assertThat(charges(id)).isZero();
    assertThat(inboxRows("billing", id)).isZero();
    assertThat(billing.receive(id, charge(id, 10), charge(id, 5))).matches(Execution::applied);
    assertThat(db.count("SELECT sum(amount) FROM charges WHERE message_id = '" + id + "'")).isEqualTo(15);
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void sixteenCopiesAtOnceApplyOnceAndTheOthersNeverSendTheirStatements(String isolation) throws Exception {
    String id = newId();
    long before = sends();
    DataSource racing = Racers.pool(db, 16, isolation);
    Inbox inbox = Idem.builder(racing).retries(RetryBudget.NONE).build().inbox("billing")
        .window(DedupeWindow.of(Duration.ofDays(8))).build();
    List<Execution<Void>> outcomes = Race.together(16, i -> inbox.receive(id, counted(), charge(id, 10),
        DSL.query(LockWaits.hold(db, 15)))); // holds the id until the others wait on it
    assertThat(outcomes).filteredOn(Execution::applied).hasSize(1);
    assertThat(outcomes).filteredOn(Execution::replayed).hasSize(15);
    assertThat(charges(id)).isEqualTo(1);
    assertThat(inboxRows("billing", id)).isEqualTo(1);
    assertThat(sends() - before).isEqualTo(1);
  }

  @Test
  void anIdPastItsWindowIsReceivedAgain() throws Exception {
    Inbox brief = idem.inbox("brief").window(DedupeWindow.of(Duration.ofMillis(1))).build();
    String id = newId();
    assertThat(brief.receive(id, charge(id, 1))).matches(Execution::applied);
    Poll.until("the id past its window on the database clock", () -> db.count("SELECT count(*) FROM idem_inbox"
        + " WHERE consumer = 'brief' AND message_id = ? AND expires_at < " + VendorSql.clock(db), id) == 1);
    assertThat(idem.inbox("brief").window(DedupeWindow.of(Duration.ofMillis(1))).build().receive(id, charge(id, 2)))
        .matches(Execution::applied);
    assertThat(charges(id)).isEqualTo(2);
    assertThat(inboxRows("brief", id)).isEqualTo(1);
  }

  @Test
  void aStatementJooqCannotBindIsRefusedBeforeAnySqlAndTheCallersTransactionGoesOn() throws Exception {
    Query unbindable = DSL.query("insert into charges values ({0}, 1)", DSL.val(new Object()));
    String order = newId();
    String id = newId();
    assertThatThrownBy(() -> billing.receive(id, charge(id, 1), unbindable))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("statements");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO charges VALUES ('" + order + "', 1)");
      }
      assertThatThrownBy(() -> billing.receive(c, id, charge(id, 1), unbindable)).isInstanceOf(IllegalArgumentException.class);
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO charges VALUES ('" + order + "', 2)");
      }
      c.commit();
    }
    assertThat(charges(order)).isEqualTo(2);
    assertThat(charges(id)).isZero();
    assertThat(inboxRows("billing", id)).isZero();
  }

  @Test
  void insideIdemInTransactionTheStatementsJoinAndGoWithTheCallersRollback() {
    String id = newId();
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      assertThat(billing.receive(id, charge(id, 10))).matches(Execution::applied);
      throw new IllegalStateException("the caller changes its mind");
    })).hasMessage("the caller changes its mind");
    assertThat(charges(id)).isZero();
    assertThat(inboxRows("billing", id)).isZero();
    idem.useTransaction(tx -> billing.receive(id, charge(id, 10)));
    assertThat(charges(id)).isEqualTo(1);
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "null   | statements must not be null",
      "empty  | statements must hold at least one statement",
      "holed  | statements[1] is null",
      "badId  | message id"})
  void badInputIsRefusedNamingTheArgumentAndNothingIsWritten(String shape, String message) throws Exception {
    String id = shape.trim().equals("badId") ? "" : newId();
    Query[] statements = switch (shape.trim()) {
      case "null" -> null;
      case "empty" -> new Query[0];
      case "holed" -> new Query[] {charge(id, 1), null};
      default -> new Query[] {charge(id, 1)};
    };
    assertThatThrownBy(() -> billing.receive(id, statements))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message.trim());
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThatThrownBy(() -> billing.receive(c, id, statements))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message.trim());
      c.rollback();
    }
    assertThatThrownBy(() -> billing.receive((Connection) null, newId(), charge(id, 1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    assertThat(charges(id)).isZero();
    assertThat(inboxRows("billing", id)).isZero();
  }
}
