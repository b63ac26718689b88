package dev.idem.jdbc;

import dev.idem.testing.TestDatabase;
import java.time.Duration;

/**
 * The few SQL expressions idem-jdbc's tests read the database with that PostgreSQL and MariaDB
 * spell differently, so that one assertion reads the same thing on either: the database clock,
 * times moved by a duration, bytes as UTF-8 text, times as microseconds, any value as text. On
 * MariaDB idem's times are DATETIME(6) in UTC, so the clock they are compared with is {@code
 * UTC_TIMESTAMP(6)}, never {@code NOW()} (the session's zone).
 *
 * <p>Test SQL that names idem's {@code key} column qualifies it ({@code k.key}): a reserved word
 * in MariaDB, it parses after a dot on both databases.
 *
 * <p>Public for idem-jdbc's test packages only (it is test code, not an API).
 */
public final class VendorSql {
  private VendorSql() {}

  /** True if {@code db} is MariaDB. */
  public static boolean maria(TestDatabase db) {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /** The database clock now, comparable with idem's times: {@code clock_timestamp()}, {@code UTC_TIMESTAMP(6)}. */
  public static String clock(TestDatabase db) {
    return maria(db) ? "UTC_TIMESTAMP(6)" : "clock_timestamp()";
  }

  /** The database clock moved by {@code offset} (negative: in the past). */
  public static String clockPlus(TestDatabase db, Duration offset) {
    return plus(db, clock(db), offset);
  }

  /** {@code time} moved by {@code offset}, to the microsecond. */
  public static String plus(TestDatabase db, String time, Duration offset) {
    long micros = offset.toNanos() / 1_000;
    return maria(db) ? "(" + time + " + INTERVAL " + micros + " MICROSECOND)"
        : "(" + time + " + " + micros + " * interval '1 microsecond')";
  }

  /** Bytes (bytea, LONGBLOB) read as UTF-8 text. */
  public static String utf8(TestDatabase db, String bytes) {
    return maria(db) ? "CONVERT(" + bytes + " USING utf8mb4)" : "convert_from(" + bytes + ", 'UTF8')";
  }

  /** A time as whole microseconds since the epoch. */
  public static String epochMicros(TestDatabase db, String time) {
    return maria(db) ? "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + time + ")"
        : "(extract(epoch from " + time + ") * 1000000)::bigint";
  }

  /** The microseconds from {@code from} to {@code to}. */
  public static String microsBetween(TestDatabase db, String from, String to) {
    return maria(db) ? "TIMESTAMPDIFF(MICROSECOND, " + from + ", " + to + ")"
        : "(extract(epoch from " + to + " - " + from + ") * 1000000)::bigint";
  }

  /** Any value as text. */
  public static String text(TestDatabase db, String value) {
    return maria(db) ? "CAST(" + value + " AS CHAR)" : "(" + value + ")::text";
  }

  /** The 16 bytes idem keeps of the empty fingerprint (SHA-256 of nothing), as a literal. */
  public static String emptyFingerprint(TestDatabase db) {
    return maria(db) ? "UNHEX(SUBSTRING(SHA2('', 256), 1, 32))" : "substring(sha256(''::bytea) FROM 1 FOR 16)";
  }

  /** Bytes written as hex digits, as a literal. */
  public static String hexBytes(TestDatabase db, String hex) {
    return maria(db) ? "UNHEX('" + hex + "')" : "decode('" + hex + "', 'hex')";
  }

  /** Bytes as lower-case hex digits. */
  public static String hex(TestDatabase db, String bytes) {
    return maria(db) ? "LOWER(HEX(" + bytes + "))" : "encode(" + bytes + ", 'hex')";
  }

  /** A column named by a word MariaDB reserves ({@code key}), quoted as the database quotes names. */
  public static String quoted(TestDatabase db, String column) {
    return maria(db) ? "`" + column + "`" : "\"" + column + "\"";
  }

  /**
   * A statement that counts each time it reaches the server, committed or rolled back: PostgreSQL's
   * {@code nextval} of the sequence {@code sends} (which a class creates: no rollback undoes a
   * sequence step); MariaDB's insert into {@code sends_seen}, a MyISAM table (no rollback undoes a
   * non-transactional write; MariaDB's sequences hand values out from a cache), made here if
   * missing. {@link #sends} counts them.
   */
  public static String send(TestDatabase db) {
    if (!maria(db)) {
      return "select nextval('sends')";
    }
    db.execute("CREATE TABLE IF NOT EXISTS sends_seen (n int) ENGINE=MyISAM");
    return "insert into sends_seen values (1)";
  }

  /** How many times {@link #send} reached the server. */
  public static long sends(TestDatabase db) {
    if (!maria(db)) {
      return db.nextvalCalls("sends");
    }
    db.execute("CREATE TABLE IF NOT EXISTS sends_seen (n int) ENGINE=MyISAM");
    return db.count("SELECT count(*) FROM sends_seen");
  }

  /**
   * A statement that fails with "division by zero": PostgreSQL's {@code select 1 / 0}; MariaDB
   * returns NULL for that, so there a block that signals SQLSTATE 22012 with the same message.
   */
  public static String divisionByZero(TestDatabase db) {
    return maria(db) ? "BEGIN NOT ATOMIC SIGNAL SQLSTATE '22012' SET MESSAGE_TEXT = 'division by zero'; END" : "select 1 / 0";
  }

  /** The session's own id: {@code pg_backend_pid()}, {@code CONNECTION_ID()}. */
  public static String sessionId(TestDatabase db) {
    return maria(db) ? "CONNECTION_ID()" : "pg_backend_pid()";
  }

  /** A statement that sleeps {@code seconds} on the server. */
  public static String sleep(TestDatabase db, double seconds) {
    return maria(db) ? "DO SLEEP(" + seconds + ")" : "SELECT pg_sleep(" + seconds + ")";
  }

  /**
   * A column type for text a test keys or indexes (MariaDB cannot index TEXT without a length):
   * {@code text}, {@code VARCHAR(512)} in a binary collation (so keys differing only by case are
   * two, as on PostgreSQL).
   */
  public static String keyText(TestDatabase db) {
    return maria(db) ? "VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" : "text";
  }
}
