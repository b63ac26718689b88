package dev.idem.testing;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * idem's rows for a key, aged past their window with SQL, so {@link Delivery#PAST_WINDOW} takes no
 * real time: the executor's and the HTTP filter's keys ({@code idem_keys.key}) and the inbox's
 * message ids ({@code idem_inbox.message_id}). idem takes a row whose {@code expires_at} has passed
 * (by the database clock) as free: a new copy claims it again and runs.
 */
final class IdemRows {
  private final DataSource dataSource;
  private final String schema;

  IdemRows(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.schema = schema;
  }

  /** Checks idem's tables are in the schema. */
  void check() {
    for (String table : new String[] {"idem_keys", "idem_inbox"}) {
      if (!exists(schema + "." + table)) {
        throw new IllegalArgumentException("PAST_WINDOW ages idem's rows, but schema '" + schema + "' has no table " + table
            + ": migrate idem's tables (IdemFlyway.migrate) or name their schema with idemSchema(...)");
      }
    }
  }

  /**
   * Moves the window of every row of {@code keys} that is still within it to have ended a second
   * ago, keeping its length ({@code created_at}, {@code completed_at} or {@code received_at} move
   * back as much); returns how many rows.
   */
  int age(String... keys) {
    String shift = "(expires_at - now() + interval '1 second')";
    return update("UPDATE " + schema + ".idem_keys SET created_at = created_at - " + shift
        + ", completed_at = completed_at - " + shift + ", expires_at = now() - interval '1 second'"
        + " WHERE key = ANY(?) AND expires_at > now()", keys)
        + update("UPDATE " + schema + ".idem_inbox SET received_at = received_at - " + shift
        + ", expires_at = now() - interval '1 second' WHERE message_id = ANY(?) AND expires_at > now()", keys);
  }

  /** How many rows of {@code keys} are past their window now (none claimed them again). */
  long pastWindow(String... keys) {
    return count("SELECT (SELECT count(*) FROM " + schema + ".idem_keys WHERE key = ANY(?) AND expires_at <= now())"
        + " + (SELECT count(*) FROM " + schema + ".idem_inbox WHERE message_id = ANY(?) AND expires_at <= now())", keys);
  }

  private boolean exists(String table) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement("SELECT to_regclass(?) IS NOT NULL")) {
      ps.setString(1, table);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not look for " + table, e);
    }
  }

  private int update(String sql, String[] keys) {
    return withKeys(sql, keys, 1, "could not age idem's rows: ", PreparedStatement::executeUpdate).intValue();
  }

  private long count(String sql, String[] keys) {
    return withKeys(sql, keys, 2, "could not read idem's rows: ", ps -> {
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }).longValue();
  }

  @FunctionalInterface
  private interface Run {
    Number on(PreparedStatement ps) throws SQLException;
  }

  /** Runs {@code sql} with {@code keys} as a text array bound to each of its {@code parameters}. */
  private Number withKeys(String sql, String[] keys, int parameters, String failure, Run run) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      Array array = c.createArrayOf("text", keys);
      for (int i = 1; i <= parameters; i++) {
        ps.setArray(i, array);
      }
      return run.on(ps);
    } catch (SQLException e) {
      throw new IllegalStateException(failure + sql, e);
    }
  }
}
