package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.time.OffsetDateTime;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The key read sends times as float8 epoch microseconds ({@link KeyTable#epochMicros}); the server
 * checks here that they come back exact, against extract()'s exact numeric, over random times.
 */
class KeyTableTimesTest {
  /** 2^32 seconds after the epoch (2106-02-07T06:28:16Z), in microseconds. */
  static final long EXACT_UNTIL = (1L << 32) * 1_000_000L;

  static TestDatabase db;

  @BeforeAll
  static void start() {
    db = TestPostgres.newDatabase("key_table_times");
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  /** Rows of {@code count} times {@code from + random * span} microseconds after the epoch, and the read's value of each beside the exact one. */
  static String times(long from, long span, int count) {
    String micros = DSL.using(SQLDialect.POSTGRES)
        .render(KeyTable.epochMicros(DSL.field(DSL.name("t"), OffsetDateTime.class)));
    return "select " + micros + " as sent, (extract(epoch from t) * 1000000)::bigint as exact from ("
        + " select timestamptz 'epoch' + (" + from + " + floor(random() * " + span + ")::bigint)"
        + " * interval '1 microsecond' as t from generate_series(1, " + count + ")"
        + " union all select statement_timestamp()"
        + " union all select timestamptz 'epoch' + " + (EXACT_UNTIL - 1) + " * interval '1 microsecond') times";
  }

  @Test
  void everyTimeUntil2106ComesBackToTheMicrosecond() {
    long wrong = db.count("select count(*) from (" + times(0, EXACT_UNTIL, 200_000) + ") s where sent <> exact");
    assertThat(wrong).isZero();
  }

  @Test
  void laterTimesAreNeverOffByMoreThanOneMicrosecond() {
    long far = db.count("select count(*) from (" + times(EXACT_UNTIL, EXACT_UNTIL, 100_000) + ") s where abs(sent - exact) > 1");
    assertThat(far).isZero();
  }
}
