package dev.idem.jdbc.internal;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.impl.CustomField;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The database clock and durations as idem's SQL uses them: whole microseconds (PostgreSQL's own
 * resolution, and MariaDB's {@code DATETIME(6)}), added to a database time, so a window, a lease
 * or a back-off is one bound number and every instant it yields comes from the database clock.
 * Each field renders for the dialect of the statement it is in: on PostgreSQL times are {@code
 * timestamptz}; on MariaDB they are {@code DATETIME(6)} holding UTC, whatever the session's time
 * zone. Not an API.
 */
public final class DbTime {
  /**
   * The longest window, lease or retention idem adds to a database time: 100 years, far inside
   * PostgreSQL's timestamp range (to the year 294276), MariaDB's DATETIME (to 9999) and a long's
   * microseconds.
   */
  public static final Duration LONGEST = Duration.ofDays(36_500);

  private DbTime() {}

  /** {@code d}, refused with an {@link IllegalArgumentException} naming it if longer than {@link #LONGEST}. */
  public static Duration bounded(Duration d, String name) {
    return Require.atMost(d, LONGEST, name, "idem's limit for a time added to the database clock");
  }

  /**
   * {@code d} in whole microseconds (nanoseconds below one are dropped).
   *
   * @throws ArithmeticException if it does not fit a long (about 292,000 years)
   */
  public static long micros(Duration d) {
    return Math.addExact(Math.multiplyExact(d.getSeconds(), 1_000_000L), d.getNano() / 1000);
  }

  private static boolean maria(org.jooq.Context<?> ctx) {
    SQLDialect family = ctx.family();
    return family == SQLDialect.MARIADB || family == SQLDialect.MYSQL;
  }

  private static final Field<OffsetDateTime> STATEMENT_TIME = CustomField.of("statement_time", SQLDataType.TIMESTAMPWITHTIMEZONE,
      ctx -> ctx.sql(maria(ctx) ? "utc_timestamp(6)" : "statement_timestamp()"));

  /**
   * Now by the database clock, read when the expression is evaluated (after any lock wait of the
   * statement): PostgreSQL's {@code clock_timestamp()}; on MariaDB {@code SYSDATE(6)}, the
   * execution time in the session's zone, moved to UTC by the session's offset at the statement's
   * start (MariaDB has no UTC form of it).
   */
  private static final Field<OffsetDateTime> CLOCK = CustomField.of("clock", SQLDataType.TIMESTAMPWITHTIMEZONE,
      ctx -> ctx.sql(maria(ctx)
          ? "(sysdate(6) + interval timestampdiff(microsecond, now(6), utc_timestamp(6)) microsecond)"
          : "clock_timestamp()"));

  /**
   * The database clock when the statement started: what a write stamps, one value for every
   * column of its row (so {@code expires - received} is exactly the window, where two reads of
   * the running clock in one statement may differ by a tick).
   */
  public static Field<OffsetDateTime> statementTime() {
    return STATEMENT_TIME;
  }

  /** Now by the database clock, as of the expression's evaluation (after any lock wait). */
  public static Field<OffsetDateTime> clock() {
    return CLOCK;
  }

  /**
   * The time in column {@code column} of {@code rs}, or null: on MariaDB a {@code DATETIME} holding
   * UTC, read as it is (the driver would read an {@code OffsetDateTime} through the session's or the
   * JVM's zone); on PostgreSQL a {@code timestamptz}.
   */
  public static java.time.OffsetDateTime read(java.sql.ResultSet rs, int column, boolean mariadb)
      throws java.sql.SQLException {
    if (!mariadb) {
      return rs.getObject(column, java.time.OffsetDateTime.class);
    }
    java.time.LocalDateTime utc = rs.getObject(column, java.time.LocalDateTime.class);
    return utc == null ? null : utc.atOffset(java.time.ZoneOffset.UTC);
  }

  /** {@code t} as MariaDB's {@code DATETIME} holding UTC is bound: the counterpart of {@link #read}. */
  public static java.time.LocalDateTime utc(java.time.Instant t) {
    return java.time.LocalDateTime.ofInstant(t, java.time.ZoneOffset.UTC);
  }

  /** {@code t + micros} microseconds, in SQL; {@code micros} may be negative. */
  public static Field<OffsetDateTime> plusMicros(Field<OffsetDateTime> t, Field<Long> micros) {
    return CustomField.of("plus_micros", SQLDataType.TIMESTAMPWITHTIMEZONE, ctx -> {
      if (maria(ctx)) {
        ctx.sql("(").visit(t).sql(" + interval ").visit(micros).sql(" microsecond)");
      } else {
        ctx.sql("(").visit(t).sql(" + ").visit(micros).sql(" * interval '1 microsecond')");
      }
    });
  }

  /**
   * {@code t} in seconds since the epoch, as a double: PostgreSQL's {@code date_part('epoch', t)};
   * on MariaDB the microseconds from 1970-01-01 (a UTC {@code DATETIME}) over a million, exact to
   * the microsecond where {@code UNIX_TIMESTAMP} would read {@code t} in the session's zone.
   */
  public static Field<Double> epochSeconds(Field<?> t) {
    return CustomField.of("epoch_seconds", SQLDataType.DOUBLE, ctx -> {
      if (maria(ctx)) {
        ctx.sql("(timestampdiff(microsecond, '1970-01-01 00:00:00', ").visit(t).sql(") / 1e6)");
      } else {
        ctx.sql("date_part('epoch', ").visit(t).sql(")");
      }
    });
  }
}
