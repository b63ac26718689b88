package dev.idem.jdbc.internal;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.Field;
import org.jooq.impl.DSL;

/**
 * Durations as idem's SQL uses them: whole microseconds (PostgreSQL's own resolution), added to a
 * database time as {@code t + n * interval '1 microsecond'}, so a window, a lease or a back-off
 * is one bound number and every instant it yields comes from the database clock. Not an API.
 */
public final class DbTime {
  /**
   * The longest window, lease or retention idem adds to a database time: 100 years, far inside
   * PostgreSQL's timestamp range (to the year 294276) and a long's microseconds.
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

  /**
   * The database clock when the statement started: what a write stamps, one value for every
   * column of its row (so {@code expires - received} is exactly the window, where two reads of
   * {@code clock_timestamp()} in one statement may differ by a tick).
   */
  public static Field<OffsetDateTime> statementTime() {
    return DSL.field("statement_timestamp()", OffsetDateTime.class);
  }

  /** {@code t + micros} microseconds, in SQL; {@code micros} may be negative. */
  public static Field<OffsetDateTime> plusMicros(Field<OffsetDateTime> t, Field<Long> micros) {
    return DSL.field("({0} + {1} * interval '1 microsecond')", OffsetDateTime.class, t, micros);
  }
}
