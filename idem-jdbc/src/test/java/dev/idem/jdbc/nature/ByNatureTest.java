package dev.idem.jdbc.nature;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Racers;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import java.sql.Connection;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Writes idempotent by nature on the test's own tables, raced on real threads; counts read from
 * the database, on PostgreSQL and on MariaDB. The clicks table is named with its schema, {@link
 * #CLICKS}: {@code ads.clicks} on PostgreSQL; on MariaDB, where a schema is a database, the test
 * database's own name.
 */
@IdemTest(poolSize = 12)
class ByNatureTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  /** The clicks table, with its schema. */
  static String CLICKS;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
    // MariaDB keys a unique index on varchar(n), never on unbounded text
    String text = mariadb() ? "varchar(64)" : "text";
    if (mariadb()) {
      CLICKS = db.name() + ".clicks";
    } else {
      CLICKS = "ads.clicks";
      db.execute("CREATE SCHEMA ads");
    }
    db.execute("CREATE TABLE " + CLICKS + " (ad_id " + text + " NOT NULL, minute " + text + " NOT NULL, clicks bigint,"
        + " PRIMARY KEY (ad_id, minute))");
    db.execute("CREATE TABLE likes (user_id " + text + " NOT NULL, post_id int NOT NULL, liked_at "
        + (mariadb() ? "datetime(6) DEFAULT utc_timestamp(6)" : "timestamptz DEFAULT now()") + ", UNIQUE (user_id, post_id))");
    db.execute("CREATE TABLE payments (order_id " + text + " NOT NULL, step " + text + " NOT NULL, amount int NOT NULL,"
        + " UNIQUE (order_id, step))");
    db.execute("CREATE TABLE ledger (order_id " + text + " NOT NULL, amount int NOT NULL)");
    db.execute("CREATE TABLE no_unique (a " + text + ", b " + (mariadb() ? "bigint" : "text") + ")");
    // a second unique index besides the key's: a player is on one board only
    db.execute("CREATE TABLE boards (player " + text + " NOT NULL, board " + text + " NOT NULL, points bigint,"
        + " PRIMARY KEY (player, board), UNIQUE (player))");
    db.execute("CREATE TABLE charges (order_id " + text + " NOT NULL, step " + text + " NOT NULL, ref " + text + " NOT NULL,"
        + " UNIQUE (order_id, step), UNIQUE (ref))");
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  // ------------------------------------------------------------------ totals

  @Test
  void aTotalKeepsTheLargerValue() {
    Totals clicks = idem.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    Map<String, String> key = Map.of("ad_id", "ad7", "minute", "14:31");
    assertThat(clicks.record(key, 400)).isEqualTo(new TotalWriteValue(Outcome.APPLIED, 400));
    assertThat(clicks.record(key, 413)).isEqualTo(new TotalWriteValue(Outcome.APPLIED, 413));
    assertThat(clicks.record(key, 413)).isEqualTo(new TotalWriteValue(Outcome.ALREADY_DONE, 413));
    // An older total replayed late does not move the number backwards.
    assertThat(clicks.record(key, 400)).isEqualTo(new TotalWriteValue(Outcome.ALREADY_DONE, 413));
    assertThat(db.count("SELECT clicks FROM " + CLICKS + " WHERE ad_id = 'ad7' AND minute = '14:31'")).isEqualTo(413);
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad7'")).isEqualTo(1);
  }

  @Test
  void aNullTotalIsRaised() {
    db.execute("INSERT INTO " + CLICKS + " VALUES ('ad-null', 'm', NULL)");
    Totals clicks = idem.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    assertThat(clicks.record(Map.of("ad_id", "ad-null", "minute", "m"), 5).outcome()).isEqualTo(Outcome.APPLIED);
    assertThat(db.count("SELECT clicks FROM " + CLICKS + " WHERE ad_id = 'ad-null'")).isEqualTo(5);
  }

  @Test
  void racingWritersOfTotalsLeaveTheLargest() throws Exception {
    Totals clicks = idem.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    Map<String, String> key = Map.of("ad_id", "ad-race", "minute", "m");
    // Twelve writers, each sending a total (some repeated), all at once, several rounds.
    for (int round = 0; round < 5; round++) {
      int base = round * 100;
      List<TotalWrite> writes = Race.together(12, i -> clicks.record(key, base + (i % 6) * 10));
      long largest = base + 50;
      assertThat(db.count("SELECT clicks FROM " + CLICKS + " WHERE ad_id = 'ad-race'")).isEqualTo(largest);
      // The writer of the largest total was applied, or found it already there from its twin.
      assertThat(writes).allSatisfy(w -> assertThat(w.stored()).isGreaterThanOrEqualTo(base + (writes.indexOf(w) % 6) * 10L));
      assertThat(writes.stream().filter(w -> w.outcome() == Outcome.APPLIED)).isNotEmpty();
    }
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad-race'")).isEqualTo(1);
  }

  @Test
  void aTotalJoinsTheCallersTransaction() throws Exception {
    Totals clicks = idem.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      clicks.record(c, Map.of("ad_id", "ad-tx", "minute", "m"), 9);
      c.rollback();
    }
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad-tx'")).isZero();
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      clicks.record(Map.of("ad_id", "ad-tx", "minute", "m"), 9);
      throw new IllegalStateException("the caller fails after the write");
    })).isInstanceOf(IllegalStateException.class);
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad-tx'")).isZero();
  }

  @Test
  void badTotalsAreRefusedClearly() {
    assertThatThrownBy(() -> idem.totals(CLICKS + "; drop table likes").key("ad_id").total("clicks").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("table").hasMessageContaining("plain SQL identifier");
    assertThatThrownBy(() -> idem.totals(CLICKS).total("clicks").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("key must name at least one column");
    assertThatThrownBy(() -> idem.totals(CLICKS).key("ad_id", "ad_id").total("clicks").build())
        .hasMessageContaining("names column ad_id twice");
    assertThatThrownBy(() -> idem.totals(CLICKS).key("ad_id", "minute").total("minute").build())
        .hasMessageContaining("must not be a key column");
    assertThatThrownBy(() -> idem.totals(CLICKS).key("ad_id", "minute").total("cl\"icks").build())
        .hasMessageContaining("total column");
    Totals clicks = idem.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    assertThatThrownBy(() -> clicks.record(Map.of("ad_id", "ad-bad"), 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no value for key column minute");
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad-bad'")).isZero();
    // Key columns without a unique constraint: PostgreSQL refuses, and on MariaDB idem does; never a second row.
    Totals loose = idem.totals("no_unique").key("a").total("b").build();
    assertThatThrownBy(() -> loose.record(Map.of("a", "x"), 1)).isInstanceOf(DataAccessException.class)
        .hasMessageContaining(mariadb() ? "no unique index or primary key of no_unique is on exactly the key columns [a]"
            : "ON CONFLICT");
    UniqueRows looseRows = idem.uniqueRows("no_unique").key("a").build();
    assertThatThrownBy(() -> looseRows.insert(Map.of("a", "x"))).isInstanceOf(DataAccessException.class)
        .hasMessageContaining(mariadb() ? "no unique index" : "ON CONFLICT");
    // A unique index on more columns than the key is not the key's either.
    Totals partOfTheKey = idem.totals(CLICKS).key("ad_id").total("clicks").build();
    assertThatThrownBy(() -> partOfTheKey.record(Map.of("ad_id", "ad-bad"), 1)).isInstanceOf(DataAccessException.class)
        .hasMessageContaining(mariadb() ? "no unique index" : "ON CONFLICT");
    assertThat(db.count("SELECT count(*) FROM no_unique")).isZero();
    assertThat(db.count("SELECT count(*) FROM " + CLICKS + " WHERE ad_id = 'ad-bad'")).isZero();
  }

  /**
   * A row whose key is new but which collides with another row on another unique index of the
   * table is refused, as a unique violation, and writes nothing: MariaDB's ON DUPLICATE KEY fires
   * on any unique index, and the other row is neither counted as this key's nor changed.
   */
  @Test
  void aWriteCollidingOnAnotherUniqueIndexIsRefusedAndChangesNothing() {
    Totals points = idem.totals("boards").key("player", "board").total("points").build();
    assertThat(points.record(Map.of("player", "p1", "board", "b1"), 5)).isEqualTo(new TotalWriteValue(Outcome.APPLIED, 5));
    assertThatThrownBy(() -> points.record(Map.of("player", "p1", "board", "b2"), 7))
        .isInstanceOf(DataAccessException.class).hasMessageContaining("unique");
    assertThat(db.count("SELECT count(*) FROM boards")).isEqualTo(1);
    assertThat(db.count("SELECT points FROM boards WHERE player = 'p1' AND board = 'b1'")).isEqualTo(5);

    UniqueRows charges = idem.uniqueRows("charges").key("order_id", "step").build();
    assertThat(charges.insert(Map.of("order_id", "o1", "step", "charge", "ref", "r1"))).isEqualTo(Outcome.APPLIED);
    assertThat(charges.insert(Map.of("order_id", "o1", "step", "charge", "ref", "r2"))).isEqualTo(Outcome.ALREADY_DONE);
    assertThatThrownBy(() -> charges.insert(Map.of("order_id", "o2", "step", "charge", "ref", "r1")))
        .isInstanceOf(DataAccessException.class).hasMessageContaining("unique");
    assertThat(db.count("SELECT count(*) FROM charges")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM charges WHERE order_id = 'o1' AND ref = 'r1'")).isEqualTo(1);
  }

  /**
   * Writers racing on real connections at each isolation level, in idem's own transactions (on
   * PostgreSQL a 40001 at REPEATABLE READ or SERIALIZABLE runs the write again within the retry
   * budget; five copies lose at most four times): a total ends at the largest, each writer told
   * APPLIED holding its own total and each told ALREADY_DONE a larger one; one like per member;
   * one effect per business key.
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void writersRacingAtEveryIsolationLevelWriteOnce(String isolation) throws Exception {
    DataSource racers = Racers.pool(db, 5, isolation);
    Idem at = Idem.builder(racers).build();
    Totals clicks = at.totals(CLICKS).key("ad_id", "minute").total("clicks").build();
    UniqueRows likes = at.uniqueRows("likes").key("user_id", "post_id").build();
    UniqueRows payments = at.uniqueRows("payments").key("order_id", "step").build();
    String level = isolation.substring("TRANSACTION_".length());
    for (int round = 0; round < 4; round++) {
      Map<String, Object> key = Map.of("ad_id", "iso-" + level, "minute", "m" + round);
      List<TotalWrite> writes = Race.together(5, i -> clicks.record(key, 10L * (i + 1)));
      for (int i = 0; i < writes.size(); i++) {
        long own = 10L * (i + 1);
        TotalWrite w = writes.get(i);
        if (w.outcome() == Outcome.APPLIED) {
          assertThat(w.stored()).as("applied by the writer of %s", own).isEqualTo(own);
        } else {
          assertThat(w.stored()).as("already done for the writer of %s", own).isGreaterThan(own);
        }
      }
      assertThat(writes.get(4).outcome()).isEqualTo(Outcome.APPLIED);
      assertThat(db.count("SELECT clicks FROM " + CLICKS + " WHERE ad_id = ? AND minute = ?", "iso-" + level, "m" + round))
          .isEqualTo(50);

      int post = round;
      List<Outcome> liked = Race.together(5, i -> likes.insert(Map.of("user_id", level, "post_id", post)));
      assertThat(liked).containsOnlyOnce(Outcome.APPLIED).containsOnly(Outcome.APPLIED, Outcome.ALREADY_DONE);

      String order = "iso-" + level + "-" + round;
      List<UniqueWrite<Integer>> charged = Race.together(5, i -> payments.insert(
          Map.of("order_id", order, "step", "charge", "amount", 100), tx -> {
            try (var ps = tx.connection().prepareStatement("INSERT INTO ledger VALUES (?, -100)")) {
              ps.setString(1, order);
              return ps.executeUpdate();
            }
          }));
      assertThat(charged.stream().filter(UniqueWrite::applied)).hasSize(1);
      assertThat(db.count("SELECT count(*) FROM ledger WHERE order_id = ?", order)).isEqualTo(1);
    }
    assertThat(db.count("SELECT count(*) FROM likes WHERE user_id = ?", level)).isEqualTo(4);
  }

  // ------------------------------------------------------------------ set membership

  @Test
  void aLikeIsAMemberOfASet() throws Exception {
    UniqueRows likes = idem.uniqueRows("likes").key("user_id", "post_id").build();
    List<Outcome> outcomes = Race.together(10, i -> likes.insert(Map.of("user_id", "u1", "post_id", 9)));
    assertThat(outcomes).containsOnlyOnce(Outcome.APPLIED);
    assertThat(outcomes.stream().filter(o -> o == Outcome.ALREADY_DONE)).hasSize(9);
    assertThat(db.count("SELECT count(*) FROM likes WHERE user_id = 'u1' AND post_id = 9")).isEqualTo(1);
    assertThat(likes.insert(Map.of("user_id", "u1", "post_id", 10))).isEqualTo(Outcome.APPLIED);
    assertThat(db.count("SELECT count(*) FROM likes WHERE user_id = 'u1'")).isEqualTo(2);
  }

  @Test
  void badRowsAreRefusedBeforeAnyWrite() {
    UniqueRows likes = idem.uniqueRows("likes").key("user_id", "post_id").build();
    assertThatThrownBy(() -> likes.insert(Map.of("user_id", "u-bad")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no value for key column post_id");
    assertThatThrownBy(() -> likes.insert(Map.of("user_id", "u-bad", "post_id", 1, "x; drop", 1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("column in row 'x; drop'");
    assertThatThrownBy(() -> idem.uniqueRows("likes").build()).hasMessageContaining("key must name at least one column");
    assertThat(db.count("SELECT count(*) FROM likes WHERE user_id = 'u-bad'")).isZero();
  }

  // ------------------------------------------------------------------ a business key as the guard

  @Test
  void aBusinessKeyGuardsTheEffect() throws Exception {
    UniqueRows payments = idem.uniqueRows("payments").key("order_id", "step").build();
    List<UniqueWrite<String>> writes = Race.together(10, i -> payments.insert(
        Map.of("order_id", "o1", "step", "charge", "amount", 4000),
        tx -> {
          tx.dsl().execute("INSERT INTO ledger VALUES ('o1', -4000)");
          return "debited by copy " + i;
        }));
    assertThat(writes.stream().filter(UniqueWrite::applied)).hasSize(1);
    assertThat(writes.stream().filter(w -> !w.applied())).allSatisfy(w -> assertThat(w.value()).isNull());
    assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = 'o1' AND step = 'charge'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM ledger WHERE order_id = 'o1'")).isEqualTo(1);
    // The next step of the same order is another key.
    assertThat(payments.insert(Map.of("order_id", "o1", "step", "refund", "amount", 4000)).toString()).isEqualTo("APPLIED");
  }

  @Test
  void anEffectThatThrowsTakesItsRowWithIt() {
    UniqueRows payments = idem.uniqueRows("payments").key("order_id", "step").build();
    assertThatThrownBy(() -> payments.insert(Map.of("order_id", "o2", "step", "charge", "amount", 1), tx -> {
      tx.dsl().execute("INSERT INTO ledger VALUES ('o2', -1)");
      throw new IllegalStateException("card declined");
    })).hasMessage("card declined");
    assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = 'o2'")).isZero();
    assertThat(db.count("SELECT count(*) FROM ledger WHERE order_id = 'o2'")).isZero();
    // The retry runs it: the key was never taken.
    UniqueWrite<Integer> retry = payments.insert(Map.of("order_id", "o2", "step", "charge", "amount", 1), tx -> 1);
    assertThat(retry.applied()).isTrue();
  }

  @Test
  void inTheCallersTransaction() throws Exception {
    UniqueRows payments = idem.uniqueRows("payments").key("order_id", "step").build();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(payments.insert(c, Map.of("order_id", "o3", "step", "charge", "amount", 1), tx -> 1).applied()).isTrue();
      assertThat(payments.insert(c, Map.of("order_id", "o3", "step", "charge", "amount", 1))).isEqualTo(Outcome.ALREADY_DONE);
      c.rollback();
    }
    assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = 'o3'")).isZero();
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> payments.insert(c, Map.of("order_id", "o3", "step", "charge", "amount", 1)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
    }
  }
}
