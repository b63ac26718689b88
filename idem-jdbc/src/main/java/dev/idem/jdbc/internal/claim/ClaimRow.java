package dev.idem.jdbc.internal.claim;

import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;

/**
 * A key's row as a claim saw it.
 *
 * @param claimed whether this statement inserted it (then only {@code fence} is set)
 * @param expirable past its window for this copy (and, in flight, past its lease): free for a new
 *     intent
 * @param pastWindow past its window for this copy, expirable or not (an external attempt still
 *     holding its lease keeps the row): no longer the key of the intent that wrote it
 * @param leaseLeft time left on an in-flight claim's lease (negative once over); null if none
 * @param windowLeft time left in the row's window as the statement saw it (null for a row this
 *     statement inserted)
 */
public record ClaimRow(boolean claimed, long fence, byte[] fingerprint, String state, byte[] result,
    Instant completedAt, Duration age, Duration leaseLeft, boolean expirable, boolean pastWindow, Duration windowLeft) {

  /**
   * Reads the row, or null if there is none. Whether the row is past its window is decided for the
   * copy that asks, as of when it arrived: the database's now, less the time this call has spent
   * since {@code startedNanos} (its monotonic start). A copy that arrived within the window of the
   * first copy's claim, then waited for that copy, is answered from the row, never run again, even
   * if the first copy ran past the window.
   */
  static ClaimRow from(ResultSet rs, long startedNanos) throws SQLException {
    return from(rs, startedNanos, false);
  }

  /** {@link #from}; {@code mariadb}: its times may be UTC {@code DATETIME} columns (see {@link #micros(ResultSet, int, boolean)}). */
  static ClaimRow from(ResultSet rs, long startedNanos, boolean mariadb) throws SQLException {
    return rs.next() ? at(rs, startedNanos, mariadb) : null;
  }

  /** {@link #from}, of the result set's current row: a batch claim's rows are read one by one. */
  static ClaimRow at(ResultSet rs, long startedNanos, boolean mariadb) throws SQLException {
    boolean claimed = rs.getBoolean(1);
    if (rs.wasNull()) {
      return null; // a claim's one row, all null: it neither inserted nor saw a row
    }
    long fence = rs.getLong(2);
    if (claimed) {
      // the claim's own time, which its row was written with (the local effect's completion)
      long stamp = micros(rs, 6, mariadb);
      Instant at = stamp == NONE ? null : instant(stamp);
      return new ClaimRow(true, fence, null, null, null, at, null, null, false, false, null);
    }
    String state = rs.getString(4);
    // Every time from the database clock; NONE where the column is null.
    long completed = micros(rs, 6, mariadb);
    boolean isCompleted = completed != NONE && ClaimTable.COMPLETED.equals(state);
    long leaseEnds = micros(rs, 7, mariadb);
    boolean hasLease = leaseEnds != NONE;
    long expiresAt = micros(rs, 8, mariadb);
    long now = micros(rs, 9, mariadb);
    long waited = Math.max(0, (System.nanoTime() - startedNanos) / 1000);
    boolean pastWindow = expiresAt <= now - waited;
    // the same test as ClaimTable's expirable, on the row's own times
    boolean expirable = pastWindow && (ClaimTable.COMPLETED.equals(state) || (hasLease && leaseEnds <= now));
    return new ClaimRow(false, fence, rs.getBytes(3), state, rs.getBytes(5),
        isCompleted ? instant(completed) : null,
        isCompleted ? duration(Math.max(0, now - completed)) : Duration.ZERO,
        hasLease ? duration(leaseEnds - now) : null,
        expirable, pastWindow, duration(expiresAt - now));
  }

  /**
   * A time read as float8 epoch seconds (PostgreSQL's date_part), in microseconds since the epoch:
   * exact until 2106 (2^32 seconds after the epoch). date_part gives the float8 nearest to the
   * stored microseconds, and that times 10^6 stays within half a microsecond of them until then,
   * so rounding to the nearest gives them back. Past 2106 a time may be off by one microsecond,
   * never more.
   */
  static long micros(double epochSeconds) {
    return (long) Math.rint(epochSeconds * 1_000_000.0);
  }

  /** A null time in {@link #micros(ResultSet, int, boolean)}'s answer. */
  private static final long NONE = Long.MIN_VALUE;

  /**
   * Column {@code column} in microseconds since the epoch, or {@link #NONE} if null: float8 epoch
   * seconds ({@link #micros(double)}), or on MariaDB a {@code DATETIME} holding UTC, read as it is
   * stored, with no zone (the driver would move an {@code OffsetDateTime} or a {@code Timestamp}
   * through the session's or the JVM's zone). Every claim table's times on MariaDB come back raw;
   * a sequence's stand-ins (1e300 for no window) stay numbers.
   */
  static long micros(ResultSet rs, int column, boolean mariadb) throws SQLException {
    if (mariadb && rs.getMetaData().getColumnType(column) == java.sql.Types.TIMESTAMP) {
      java.time.LocalDateTime utc = rs.getObject(column, java.time.LocalDateTime.class);
      return utc == null ? NONE
          : Math.addExact(Math.multiplyExact(utc.toEpochSecond(java.time.ZoneOffset.UTC), 1_000_000L), utc.getNano() / 1000);
    }
    double seconds = rs.getDouble(column);
    return rs.wasNull() ? NONE : micros(seconds);
  }

  static Instant instant(long micros) {
    return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000);
  }

  static Duration duration(long micros) {
    return Duration.ofNanos(micros * 1000);
  }

  /**
   * The completed row a claim of this call inserted, as a repeat would read it: no age yet, the
   * whole window left, the call's fingerprint (or none) and result.
   */
  static ClaimRow applied(Instant completedAt, byte[] fingerprint, byte[] result, Duration window) {
    return new ClaimRow(false, 0, fingerprint, ClaimTable.COMPLETED, result, completedAt, Duration.ZERO, null, false, false,
        window);
  }

  /**
   * This row as it is {@code later} after it was read: older, with less of its window left, and
   * its result a copy (a codec may hand the bytes to its caller, who may change them).
   */
  ClaimRow after(Duration later) {
    return new ClaimRow(claimed, fence, fingerprint, state, result == null ? null : result.clone(), completedAt,
        age.plus(later), leaseLeft, expirable, pastWindow, windowLeft.minus(later));
  }

  public boolean completed() {
    return ClaimTable.COMPLETED.equals(state);
  }

  public boolean leaseLive() {
    return leaseLeft != null && leaseLeft.compareTo(Duration.ZERO) > 0;
  }
}
