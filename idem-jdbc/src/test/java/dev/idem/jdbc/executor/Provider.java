package dev.idem.jdbc.executor;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;
import javax.sql.DataSource;

/**
 * A payment provider that dedupes by the idempotency key it is sent, as real ones do: one charge
 * per key, however often it is called. {@code calls} counts the calls, {@code charges} (one row per
 * key) the effects. Its table lives in the test database but outside any executor transaction.
 */
final class Provider {
  /** SQL both databases accept ({@code serial}: a sequence on PostgreSQL, AUTO_INCREMENT UNIQUE on MariaDB). */
  static final String TABLE = "CREATE TABLE IF NOT EXISTS provider_charges ("
      + " call_key varchar(600) PRIMARY KEY, charge_id serial, amount int NOT NULL, calls int NOT NULL DEFAULT 1)";

  private Provider() {}

  /** Charges once per call key and returns the charge's id. */
  static String charge(DataSource ds, String callKey, int amount) throws SQLException {
    try (Connection c = ds.getConnection()) {
      if (!c.getAutoCommit()) {
        c.setAutoCommit(true);
      }
      if (!c.getMetaData().getDatabaseProductName().toLowerCase(java.util.Locale.ROOT).contains("mariadb")) {
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO provider_charges (call_key, amount) VALUES (?, ?)"
            + " ON CONFLICT (call_key) DO UPDATE SET calls = provider_charges.calls + 1 RETURNING charge_id")) {
          ps.setString(1, callKey);
          ps.setInt(2, amount);
          try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            return "ch_" + rs.getLong(1);
          }
        }
      }
      // MariaDB: no RETURNING on an upsert; the charge's id never changes once inserted, so a read after it is the one.
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO provider_charges (call_key, amount) VALUES (?, ?)"
          + " ON DUPLICATE KEY UPDATE calls = calls + 1")) {
        ps.setString(1, callKey);
        ps.setInt(2, amount);
        ps.executeUpdate();
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT charge_id FROM provider_charges WHERE call_key = ?")) {
        ps.setString(1, callKey);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          return "ch_" + rs.getLong(1);
        }
      }
    }
  }

  /** The provider's look-up by reference: the charge made under a call key, if any. */
  static Optional<String> lookUp(DataSource ds, String callKey) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT charge_id FROM provider_charges WHERE call_key = ?")) {
      ps.setString(1, callKey);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Optional.of("ch_" + rs.getLong(1)) : Optional.empty();
      }
    }
  }
}
