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
import javax.sql.DataSource;
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
@IdemTest(poolSize = 4, sql = {"CREATE TABLE payments (id bigserial PRIMARY KEY, order_key text, amount int NOT NULL)",
    "CREATE TABLE refunds (id bigserial PRIMARY KEY, order_key text, amount int NOT NULL)"})
class ReconciliationTest {
  static {
    System.setProperty("org.slf4j.simpleLogger.log.dev.idem.operations", "info"); // as OperationsTest
  }

  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static IdempotentExecutor executor;
  static Reconciliation reconciliation;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
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
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table + " (order_key, amount) VALUES (?, 10)")) {
      ps.setString(1, key);
      ps.executeUpdate();
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
    db.execute("INSERT INTO refunds (order_key, amount) VALUES ('r1', 10)"); // a duplicate effect, written outside idem
    db.execute("INSERT INTO refunds (order_key, amount) VALUES (NULL, 10)"); // an effect with no key
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
    assertThat(f.keysWithoutEffect()).containsExactly("r2");
    assertThat(f.unknownOutcomes().count()).isEqualTo(1);
    assertThat(f.unknownSample()).extracting(s -> s.key()).containsExactly(stuck);

    assertThat(reconciliation.record(f)).isEqualTo(4);
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE effect_table = 'refunds.order_key' AND found_at = ?",
        f.checkedAt())).isEqualTo(4);
    for (String kindAndKey : new String[] {"DUPLICATE_EFFECT r1", "EFFECT_WITHOUT_KEY -", "KEY_WITHOUT_EFFECT r2",
        "UNKNOWN_OUTCOME " + stuck}) {
      assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE kind || ' ' || coalesce(key, '-') = ?", kindAndKey))
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
