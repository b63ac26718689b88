package dev.idem.jdbc.internal.claim;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.OffsetDateTime;
import java.util.Map;
import java.util.TreeMap;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The key read sends times as float8 epoch seconds ({@link ClaimTable.epochSeconds}), which the
 * client turns into microseconds ({@link ClaimRow.micros(double)}); checked here against
 * extract()'s exact numeric, over random times sent by the server. (MariaDB: DbTime.epochSeconds's
 * form over DATETIME(6), against timestampdiff's exact microseconds.)
 */
@IdemTest(migrate = false)
class ClaimTimesTest {
  /** 2^32 seconds after the epoch (2106-02-07T06:28:16Z), in microseconds. */
  static final long EXACT_UNTIL = (1L << 32) * 1_000_000L;

  static TestDatabase db;

  @BeforeAll
  static void start(TestDatabase database) {
    db = database;
  }

  /** Rows of {@code count} times {@code from + random * span} microseconds after the epoch, and the read's value of each beside the exact one. */
  static String times(long from, long span, int count) {
    if (db.vendor() == TestDatabase.Vendor.MARIADB) {
      // MariaDB: DATETIME(6) in UTC, sent as DbTime.epochSeconds renders it there; rows from the
      // sequence engine's seq_1_to_n
      String seconds = DSL.using(SQLDialect.MARIADB).render(dev.idem.jdbc.internal.DbTime.epochSeconds(DSL.field(DSL.name("t"))));
      String epoch = "'1970-01-01 00:00:00'";
      return "select " + seconds + " as sent, timestampdiff(microsecond, " + epoch + ", t) as exact from ("
          + " select timestampadd(microsecond, " + from + " + floor(rand() * " + span + "), " + epoch + ") as t"
          + " from seq_1_to_" + count
          + " union all select utc_timestamp(6)"
          + " union all select timestampadd(microsecond, " + (EXACT_UNTIL - 1) + ", " + epoch + ")) times";
    }
    String seconds = DSL.using(SQLDialect.POSTGRES)
        .render(ClaimTable.epochSeconds(DSL.field(DSL.name("t"), OffsetDateTime.class)));
    return "select " + seconds + " as sent, (extract(epoch from t) * 1000000)::bigint as exact from ("
        + " select timestamptz 'epoch' + (" + from + " + floor(random() * " + span + ")::bigint)"
        + " * interval '1 microsecond' as t from generate_series(1, " + count + ")"
        + " union all select statement_timestamp()"
        + " union all select timestamptz 'epoch' + " + (EXACT_UNTIL - 1) + " * interval '1 microsecond') times";
  }

  /** How far off the client's microseconds are for each time the query sends: {@code |read - exact|}, counted by value. */
  static Map<Long, Integer> errors(String query) throws SQLException {
    Map<Long, Integer> errors = new TreeMap<>();
    try (Connection c = db.connect(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      while (rs.next()) {
        errors.merge(Math.abs(ClaimRow.micros(rs.getDouble(1)) - rs.getLong(2)), 1, Integer::sum);
      }
    }
    return errors;
  }

  @Test
  void everyTimeUntil2106ComesBackToTheMicrosecond() throws SQLException {
    assertThat(errors(times(0, EXACT_UNTIL, 200_000))).containsOnlyKeys(0L).containsEntry(0L, 200_002);
  }

  @Test
  void laterTimesAreNeverOffByMoreThanOneMicrosecond() throws SQLException {
    assertThat(errors(times(EXACT_UNTIL, EXACT_UNTIL, 100_000)).keySet()).isSubsetOf(0L, 1L);
  }
}
