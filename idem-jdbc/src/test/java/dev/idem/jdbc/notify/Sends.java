package dev.idem.jdbc.notify;

import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * The tests' recording sender, a real effect: one committed row in {@code sends} per message handed
 * to it, with what the sender was given.
 */
final class Sends {
  private Sends() {}

  /**
   * The table's DDL on PostgreSQL, or on MariaDB (bounded varchars; the database clock's UTC, as
   * idem's own times there).
   */
  static String table(boolean mariadb) {
    return mariadb
        ? "CREATE TABLE sends (notification_id varchar(255) NOT NULL, channel varchar(255) NOT NULL, recipient varchar(255)"
            + " NOT NULL, collapse_id varchar(64) NOT NULL, takeover boolean NOT NULL,"
            + " sent_at datetime(6) NOT NULL DEFAULT (utc_timestamp(6)))"
        : "CREATE TABLE sends (notification_id text NOT NULL, channel text NOT NULL, recipient text NOT NULL,"
            + " collapse_id text NOT NULL, takeover boolean NOT NULL, sent_at timestamptz NOT NULL DEFAULT clock_timestamp())";
  }

  /** A sender that records each send in {@code sends}, in a transaction of its own. */
  static Sender<SQLException> into(DataSource ds) {
    return out -> {
      try (Connection c = ds.getConnection();
          PreparedStatement ps = c.prepareStatement(
              "INSERT INTO sends (notification_id, channel, recipient, collapse_id, takeover) VALUES (?, ?, ?, ?, ?)")) {
        ps.setString(1, out.notification().id());
        ps.setString(2, out.notification().channel());
        ps.setString(3, out.notification().recipient());
        ps.setString(4, out.collapseId());
        ps.setBoolean(5, out.takeover());
        ps.executeUpdate();
      }
    };
  }

  static long of(TestDatabase db, String id) {
    return db.count("SELECT count(*) FROM sends WHERE notification_id = ?", id);
  }
}
