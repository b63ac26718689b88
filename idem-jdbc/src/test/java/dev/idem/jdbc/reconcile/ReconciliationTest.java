package dev.idem.jdbc.reconcile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.time.ZoneOffset;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Reconciliation finds every break planted in an effect table and none in a clean one; the
 * command line's exit codes. The tests run in order: the clean checks come before a stuck key
 * (an unknown outcome, counted in every scope) is planted.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
// DDL both databases take: the effect rows get their ids from the tests
@IdemTest(poolSize = 4, sql = {"CREATE TABLE payments (id varchar(64) PRIMARY KEY, order_key varchar(255), amount int NOT NULL)",
    "CREATE TABLE refunds (id varchar(64) PRIMARY KEY, order_key varchar(255), amount int NOT NULL)"})
class ReconciliationTest {

  static {
    System.setProperty("org.slf4j.simpleLogger.log.dev.idem.operations", "info"); // as OperationsTest
  }

  static TestDatabase db;
  static DataSource ds;
  static boolean maria;
  static Idem idem;
  static IdempotentExecutor executor;
  static Reconciliation reconciliation;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    maria = db.vendor() == TestDatabase.Vendor.MARIADB;
    idem = Idem.builder(ds).build(); // built here, after the logger's level was set above
    executor = idem.executor().build();
    reconciliation = idem.reconciliation();
    for (String k : new String[] {"o1", "o2", "o3"}) {
      pay("payments", "shop", k);
    }
  }

  /** One payment through the executor: the key and its effect commit together. */
  static void pay(String table, String scope, String key) {
    try {
      payOrThrow(table, scope, key);
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
  }

  static void payOrThrow(String table, String scope, String key) throws java.sql.SQLException {
    executor.execute(IdempotencyKey.of(scope, key), Fingerprint.of(key), Codec.utf8(), tx -> {
      insert(tx.connection(), table, key);
      return "paid";
    });
  }

  static void insert(java.sql.Connection c, String table, String key) throws java.sql.SQLException {
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table + " (id, order_key, amount) VALUES (?, ?, 10)")) {
      ps.setString(1, UUID.randomUUID().toString());
      ps.setString(2, key);
      ps.executeUpdate();
    }
  }

  /** An effect written outside idem (no key claimed), with the id it is given. */
  static void insertOutsideIdem(String table, String id, String key) {
    try (var c = ds.getConnection()) {
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table + " (id, order_key, amount) VALUES (?, ?, 10)")) {
        ps.setString(1, id);
        ps.setString(2, key);
        ps.executeUpdate();
      }
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  @Order(1)
  void aCleanTableHasNoBreaks() {
    Findings f = reconciliation.check(EffectTable.of("payments", "order_key").withScope("shop"));
    assertThat(f.clean()).as(f.toString()).isTrue();
    assertThat(f.checkedAt()).isNotNull();
    assertThat(reconciliation.record(f)).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_breaks")).isZero();
    assertThat(ReconcileCommand.run(args("--table", "payments", "--key-column", "order_key", "--scope", "shop"),
        new PrintStream(new ByteArrayOutputStream()), System.err)).isZero();
  }

  @Test
  @Order(2)
  void everyPlantedBreakIsFoundAndRecorded() {
    pay("refunds", "refund", "r1");
    insertOutsideIdem("refunds", "dup", "r1"); // a duplicate effect, written outside idem
    insertOutsideIdem("refunds", "keyless", null); // an effect with no key
    pay("refunds", "refund", "r2");
    db.execute("DELETE FROM refunds WHERE order_key = 'r2'"); // a key whose effect is gone
    IdempotencyKey stuck = IdempotencyKey.of("refund", "r3"); // an unknown outcome, made for real: the call threw
    assertThatThrownBy(() -> executor.executeExternal(stuck, Fingerprint.of("r3"), Codec.utf8(), a -> {
      throw new IOException("provider timed out");
    })).isInstanceOf(IOException.class);

    Findings f = reconciliation.check(EffectTable.of("refunds", "order_key").withScope("refund"));
    assertThat(f.clean()).isFalse();
    assertThat(f.duplicates()).containsExactly(new FindingsValue.DuplicateValue("r1", 2));
    assertThat(f.effectsWithoutKey()).isEqualTo(1);
    assertThat(f.effectsWithoutKeySample()).hasSize(1);
    // its address: PostgreSQL's ctid, MariaDB's primary key
    assertThat(f.effectsWithoutKeySample().get(0)).matches(maria ? "id=keyless" : "\\(\\d+,\\d+\\)");
    assertThat(f.keysWithoutEffect()).containsExactly("r2");
    assertThat(f.unknownOutcomes().count()).isEqualTo(1);
    assertThat(f.unknownSample()).extracting(s -> s.key()).containsExactly(stuck);

    assertThat(reconciliation.record(f)).isEqualTo(4);
    // MariaDB's found_at is a DATETIME holding UTC
    Object foundAt = maria ? f.checkedAt().withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime() : f.checkedAt();
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE effect_table = 'refunds.order_key' AND found_at = ?",
        foundAt)).isEqualTo(4);
    for (String kindAndKey : new String[] {"DUPLICATE_EFFECT r1", "EFFECT_WITHOUT_KEY -", "KEY_WITHOUT_EFFECT r2",
        "UNKNOWN_OUTCOME " + stuck}) {
      assertThat(db.count("SELECT count(*) FROM idem_breaks b WHERE concat(b.kind, ' ', coalesce(b.key, '-')) = ?", kindAndKey))
          .as(kindAndKey).isEqualTo(1);
    }

    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int exit = ReconcileCommand.run(args("--table", "refunds", "--key-column", "order_key", "--scope", "refund", "--record"),
        new PrintStream(out, true, StandardCharsets.UTF_8), System.err);
    assertThat(exit).isEqualTo(1);
    assertThat(out.toString(StandardCharsets.UTF_8)).contains("duplicate effect: key r1, 2 effects", "key without effect: r2",
        "recorded 4 break row(s)");
    assertThat(db.count("SELECT count(*) FROM idem_breaks")).isEqualTo(8);
  }

  @Test
  @Order(3)
  void keysAreComparedExactlyWhateverTheEffectColumnsCollation() throws Exception {
    // A collation that folds case and trailing spaces (MariaDB's default kind): compared by it,
    // these three effects would be one intent's three, and d1's effect D1 would count as d1's.
    db.execute("CREATE TABLE exact_effects (id varchar(64) PRIMARY KEY, order_key varchar(255)"
        + (maria ? " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci" : "") + ", amount int NOT NULL)");
    pay("exact_effects", "exact", "c1");
    pay("exact_effects", "exact", "C1");
    insertOutsideIdem("exact_effects", "padded", "c1 ");
    executor.execute(IdempotencyKey.of("exact", "d1"), Fingerprint.of("d1"), Codec.utf8(), tx -> {
      insert(tx.connection(), "exact_effects", "D1");
      return "paid";
    });

    Findings f = reconciliation.check(EffectTable.of("exact_effects", "order_key").withScope("exact"));
    assertThat(f.duplicates()).isEmpty();
    assertThat(f.keysWithoutEffect()).containsExactly("d1");
  }

  @Test
  @Order(4)
  void onMariaDbAnEffectTableWithoutPrimaryKeyIsRefusedNamingIt() {
    Assumptions.assumeTrue(maria, "PostgreSQL names a row by its ctid");
    db.execute("CREATE TABLE no_pk (order_key varchar(255))");
    assertThatThrownBy(() -> reconciliation.check(EffectTable.of("no_pk", "order_key")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no_pk.order_key has no primary key");
  }

  @Test
  @Order(5)
  void badArgumentsExitWithTwoAndTheUsage() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    PrintStream out = new PrintStream(new ByteArrayOutputStream());
    assertThat(ReconcileCommand.run(new String[] {"--table", "payments"}, out, e)).isEqualTo(2);
    assertThat(ReconcileCommand.run(args("--table", "pay;ments", "--key-column", "order_key"), out, e)).isEqualTo(2);
    assertThat(ReconcileCommand.run(args("--table", "payments", "--key-column", "order_key", "--bogus", "x"), out, e)).isEqualTo(2);
    assertThat(ReconcileCommand.run(args("--table", "no_such_table", "--key-column", "order_key"), out, e)).isEqualTo(2);
    assertThat(err.toString(StandardCharsets.UTF_8)).contains("usage: ReconcileCommand", "table 'pay;ments'", "unknown argument --bogus",
        "reconciliation failed");
    assertThatThrownBy(() -> EffectTable.of("payments", "order key")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("keyColumn");
    assertThatThrownBy(() -> reconciliation.check(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("target");
  }

  private static String[] args(String... rest) {
    String[] all = new String[rest.length + 2];
    all[0] = "--url";
    all[1] = db.jdbcUrl();
    System.arraycopy(rest, 0, all, 2, rest.length);
    return all;
  }
}
