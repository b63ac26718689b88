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

/** Now by the database clock, read on a transaction's connection: what decides a webhook's freshness. */
final class DatabaseClock {
  private DatabaseClock() {}

  static boolean mariadb(Tx tx) {
    SQLDialect family = tx.dsl().dialect().family();
    return family == SQLDialect.MARIADB || family == SQLDialect.MYSQL;
  }

  static Instant now(Tx tx) throws SQLException {
    boolean mariadb = mariadb(tx);
    // MariaDB: UTC_TIMESTAMP(6) is a DATETIME in UTC, read as it is (never through a zone).
    try (PreparedStatement s = tx.connection().prepareStatement(mariadb ? "SELECT UTC_TIMESTAMP(6)" : "SELECT clock_timestamp()");
        ResultSet rs = s.executeQuery()) {
      rs.next();
      return mariadb ? rs.getObject(1, LocalDateTime.class).toInstant(ZoneOffset.UTC)
          : rs.getObject(1, OffsetDateTime.class).toInstant();
    }
  }
}
