package dev.idem.testing;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Collections;
import javax.sql.DataSource;

/**
 * idem's rows for a key, aged past their window with SQL, so {@link Delivery#PAST_WINDOW} takes no
 * real time: the executor's and the HTTP filter's keys ({@code idem_keys.key}) and the inbox's
 * message ids ({@code idem_inbox.message_id}). idem takes a row whose {@code expires_at} has passed
 * (by the database clock) as free: a new copy claims it again and runs. On PostgreSQL or on
 * MariaDB, whose idem tables hold UTC times compared with {@code UTC_TIMESTAMP(6)}.
 */
final class IdemRows {
  private final DataSource dataSource;
  /** Null: the default schema, {@code idem} on PostgreSQL and the DataSource's own database on MariaDB. */
  private final String schema;
  /** Null until first asked. */
  private Boolean postgresql;

  IdemRows(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.schema = schema;
  }

  /** Checks idem's tables are in the schema. */
  void check() {
    for (String table : new String[] {"idem_keys", "idem_inbox"}) {
      if (!exists(table)) {
        throw new IllegalArgumentException("PAST_WINDOW ages idem's rows, but " + (schema == null && !postgresql()
            ? "the DataSource's database" : "schema '" + (schema == null ? "idem" : schema) + "'") + " has no table " + table
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
    if (postgresql()) {
      String shift = "(expires_at - now() + interval '1 second')";
      return update("UPDATE " + table("idem_keys") + " SET created_at = created_at - " + shift
          + ", completed_at = completed_at - " + shift + ", expires_at = now() - interval '1 second'"
          + " WHERE key = ANY(?) AND expires_at > now()", keys)
          + update("UPDATE " + table("idem_inbox") + " SET received_at = received_at - " + shift
          + ", expires_at = now() - interval '1 second' WHERE message_id = ANY(?) AND expires_at > now()", keys);
    }
    // MariaDB assigns left to right, each seeing the columns already set: expires_at goes last, so
    // the shifts before it read its old value.
    String shift = "INTERVAL (TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) + 1000000) MICROSECOND";
    String ended = "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND";
    return update("UPDATE " + table("idem_keys") + " SET created_at = created_at - " + shift
        + ", completed_at = completed_at - " + shift + ", expires_at = " + ended
        + " WHERE `key` IN (" + marks(keys) + ") AND expires_at > UTC_TIMESTAMP(6)", keys)
        + update("UPDATE " + table("idem_inbox") + " SET received_at = received_at - " + shift + ", expires_at = " + ended
        + " WHERE message_id IN (" + marks(keys) + ") AND expires_at > UTC_TIMESTAMP(6)", keys);
  }

  /** How many rows of {@code keys} are past their window now (none claimed them again). */
  long pastWindow(String... keys) {
    if (postgresql()) {
      return count("SELECT (SELECT count(*) FROM " + table("idem_keys") + " WHERE key = ANY(?) AND expires_at <= now())"
          + " + (SELECT count(*) FROM " + table("idem_inbox") + " WHERE message_id = ANY(?) AND expires_at <= now())", keys);
    }
    return count("SELECT (SELECT count(*) FROM " + table("idem_keys") + " WHERE `key` IN (" + marks(keys) + ")"
        + " AND expires_at <= UTC_TIMESTAMP(6)) + (SELECT count(*) FROM " + table("idem_inbox") + " WHERE message_id IN ("
        + marks(keys) + ") AND expires_at <= UTC_TIMESTAMP(6))", keys);
  }

  /** {@code name} in idem's schema; unqualified for MariaDB's default, the connection's own database. */
  private String table(String name) {
    return schema != null ? schema + "." + name : postgresql() ? "idem." + name : name;
  }

  private static String marks(String[] keys) {
    return String.join(", ", Collections.nCopies(Math.max(keys.length, 1), "?"));
  }

  private synchronized boolean postgresql() {
    if (postgresql == null) {
      try (Connection c = dataSource.getConnection()) {
        postgresql = "PostgreSQL".equalsIgnoreCase(c.getMetaData().getDatabaseProductName());
      } catch (SQLException e) {
        throw new IllegalStateException("could not tell which database idem's rows are in", e);
      }
    }
    return postgresql;
  }

  private boolean exists(String table) {
    String sql = postgresql() ? "SELECT to_regclass(?) IS NOT NULL"
        : "SELECT count(*) > 0 FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?";
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      if (postgresql()) {
        ps.setString(1, table(table));
      } else {
        ps.setString(1, schema);
        ps.setString(2, table);
      }
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

  /**
   * Runs {@code sql} with {@code keys} bound to each of its {@code lists}: PostgreSQL, one text
   * array a list; MariaDB, which has no arrays, one parameter a key ({@link #marks}; no key at all
   * binds a null, which matches nothing).
   */
  private Number withKeys(String sql, String[] keys, int lists, String failure, Run run) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      if (postgresql()) {
        Array array = c.createArrayOf("text", keys);
        for (int i = 1; i <= lists; i++) {
          ps.setArray(i, array);
        }
      } else {
        int p = 1;
        for (int i = 0; i < lists; i++) {
          if (keys.length == 0) {
            ps.setString(p++, null);
          }
          for (String key : keys) {
            ps.setString(p++, key);
          }
        }
      }
      return run.on(ps);
    } catch (SQLException e) {
      throw new IllegalStateException(failure + sql, e);
    }
  }
}
