package dev.idem.http;

import dev.idem.jdbc.tx.Tx;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.jooq.SQLDialect;

/**
 * Now by the database clock, read on a transaction's connection (what decides a webhook's
 * freshness), and what reading idem's key table takes on either database.
 */
final class DatabaseClock {
  private DatabaseClock() {}

  static boolean mariadb(Tx tx) {
    SQLDialect family = tx.dsl().dialect().family();
    return family == SQLDialect.MARIADB || family == SQLDialect.MYSQL;
  }

  /** idem's key table in {@code schema} (validated by {@code Idem.builder}), quoted as each database quotes names. */
  static String keysTable(boolean mariadb, String schema) {
    return mariadb ? "`" + schema + "`.idem_keys" : "\"" + schema + "\".idem_keys";
  }

  /**
   * A timestamp column as an instant, or null: on MariaDB a DATETIME holding UTC, read as it is,
   * never through the session's or the JVM's zone.
   */
  static Instant instant(ResultSet rs, int column, boolean mariadb) throws SQLException {
    if (mariadb) {
      LocalDateTime utc = rs.getObject(column, LocalDateTime.class);
      return utc == null ? null : utc.toInstant(ZoneOffset.UTC);
    }
    OffsetDateTime t = rs.getObject(column, OffsetDateTime.class);
    return t == null ? null : t.toInstant();
  }

  static Instant now(Tx tx) throws SQLException {
    boolean mariadb = mariadb(tx);
    // MariaDB: UTC_TIMESTAMP(6) is a DATETIME in UTC, read as it is (never through a zone).
    try (PreparedStatement s = tx.connection().prepareStatement(mariadb ? "SELECT UTC_TIMESTAMP(6)" : "SELECT clock_timestamp()");
        ResultSet rs = s.executeQuery()) {
      rs.next();
      return instant(rs, 1, mariadb);
    }
  }
}
