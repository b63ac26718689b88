package dev.idem.jdbc.nature;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
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

/** Writes idempotent by nature on the test's own tables, raced on real threads; counts read from the database. */
@IdemTest(poolSize = 12, sql = {
    "CREATE SCHEMA ads",
    "CREATE TABLE ads.clicks (ad_id text NOT NULL, minute text NOT NULL, clicks bigint,"
        + " PRIMARY KEY (ad_id, minute))",
    "CREATE TABLE likes (user_id text NOT NULL, post_id int NOT NULL, liked_at timestamptz DEFAULT now(),"
        + " UNIQUE (user_id, post_id))",
    "CREATE TABLE payments (order_id text NOT NULL, step text NOT NULL, amount int NOT NULL,"
        + " UNIQUE (order_id, step))",
    "CREATE TABLE ledger (order_id text NOT NULL, amount int NOT NULL)",
    "CREATE TABLE no_unique (a text, b text)"})
class ByNatureTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
  }

  // ------------------------------------------------------------------ totals

  @Test
  void aTotalKeepsTheLargerValue() {
    Totals clicks = idem.totals("ads.clicks").key("ad_id", "minute").total("clicks").build();
    Map<String, String> key = Map.of("ad_id", "ad7", "minute", "14:31");
    assertThat(clicks.record(key, 400)).isEqualTo(new TotalWriteValue(Outcome.APPLIED, 400));
    assertThat(clicks.record(key, 413)).isEqualTo(new TotalWriteValue(Outcome.APPLIED, 413));
    assertThat(clicks.record(key, 413)).isEqualTo(new TotalWriteValue(Outcome.ALREADY_DONE, 413));
    // An older total replayed late does not move the number backwards.
    assertThat(clicks.record(key, 400)).isEqualTo(new TotalWriteValue(Outcome.ALREADY_DONE, 413));
    assertThat(db.count("SELECT clicks FROM ads.clicks WHERE ad_id = 'ad7' AND minute = '14:31'")).isEqualTo(413);
    assertThat(db.count("SELECT count(*) FROM ads.clicks WHERE ad_id = 'ad7'")).isEqualTo(1);
  }

  @Test
  void aNullTotalIsRaised() {
    db.execute("INSERT INTO ads.clicks VALUES ('ad-null', 'm', NULL)");
    Totals clicks = idem.totals("ads.clicks").key("ad_id", "minute").total("clicks").build();
    assertThat(clicks.record(Map.of("ad_id", "ad-null", "minute", "m"), 5).outcome()).isEqualTo(Outcome.APPLIED);
    assertThat(db.count("SELECT clicks FROM ads.clicks WHERE ad_id = 'ad-null'")).isEqualTo(5);
  }

  @Test
  void racingWritersOfTotalsLeaveTheLargest() throws Exception {
    Totals clicks = idem.totals("ads.clicks").key("ad_id", "minute").total("clicks").build();
    Map<String, String> key = Map.of("ad_id", "ad-race", "minute", "m");
    // Twelve writers, each sending a total (some repeated), all at once, several rounds.
    for (int round = 0; round < 5; round++) {
      int base = round * 100;
      List<TotalWrite> writes = Race.together(12, i -> clicks.record(key, base + (i % 6) * 10));
      long largest = base + 50;
      assertThat(db.count("SELECT clicks FROM ads.clicks WHERE ad_id = 'ad-race'")).isEqualTo(largest);
      // The writer of the largest total was applied, or found it already there from its twin.
      assertThat(writes).allSatisfy(w -> assertThat(w.stored()).isGreaterThanOrEqualTo(base + (writes.indexOf(w) % 6) * 10L));
      assertThat(writes.stream().filter(w -> w.outcome() == Outcome.APPLIED)).isNotEmpty();
    }
    assertThat(db.count("SELECT count(*) FROM ads.clicks WHERE ad_id = 'ad-race'")).isEqualTo(1);
  }

  @Test
  void aTotalJoinsTheCallersTransaction() throws Exception {
    Totals clicks = idem.totals("ads.clicks").key("ad_id", "minute").total("clicks").build();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      clicks.record(c, Map.of("ad_id", "ad-tx", "minute", "m"), 9);
      c.rollback();
    }
    assertThat(db.count("SELECT count(*) FROM ads.clicks WHERE ad_id = 'ad-tx'")).isZero();
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      clicks.record(Map.of("ad_id", "ad-tx", "minute", "m"), 9);
      throw new IllegalStateException("the caller fails after the write");
    })).isInstanceOf(IllegalStateException.class);
    assertThat(db.count("SELECT count(*) FROM ads.clicks WHERE ad_id = 'ad-tx'")).isZero();
  }

  @Test
  void badTotalsAreRefusedClearly() {
    assertThatThrownBy(() -> idem.totals("ads.clicks; drop table likes").key("ad_id").total("clicks").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("table").hasMessageContaining("plain SQL identifier");
    assertThatThrownBy(() -> idem.totals("ads.clicks").total("clicks").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("key must name at least one column");
    assertThatThrownBy(() -> idem.totals("ads.clicks").key("ad_id", "ad_id").total("clicks").build())
        .hasMessageContaining("names column ad_id twice");
    assertThatThrownBy(() -> idem.totals("ads.clicks").key("ad_id", "minute").total("minute").build())
        .hasMessageContaining("must not be a key column");
    assertThatThrownBy(() -> idem.totals("ads.clicks").key("ad_id", "minute").total("cl\"icks").build())
        .hasMessageContaining("total column");
    Totals clicks = idem.totals("ads.clicks").key("ad_id", "minute").total("clicks").build();
    assertThatThrownBy(() -> clicks.record(Map.of("ad_id", "ad-bad"), 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no value for key column minute");
    assertThat(db.count("SELECT count(*) FROM ads.clicks WHERE ad_id = 'ad-bad'")).isZero();
    // Key columns without a unique constraint: PostgreSQL refuses, never a second row.
    Totals loose = idem.totals("no_unique").key("a").total("b").build();
    assertThatThrownBy(() -> loose.record(Map.of("a", "x"), 1)).isInstanceOf(DataAccessException.class)
        .hasMessageContaining("ON CONFLICT");
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
