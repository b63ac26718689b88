package dev.idem.benchmarks;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * What a benchmark runs before every iteration of every method ({@code @Setup(Level.Iteration)},
 * off the clock). PostgreSQL: vacuums and analyzes the tables and, where the role may,
 * checkpoints. MariaDB: analyzes the tables and waits (at most {@value #PURGE_WAIT_MILLIS} ms) for
 * InnoDB's purge to catch up with the old row versions the writes left, its counterpart of
 * vacuum; it cannot checkpoint without changing the server's global settings, so it does not.
 * Under JMH ({@code @Fork(1)}) each method runs in a JVM of its own, on a pool and a fresh database
 * of its own (with the embedded default, a server of its own), so no method inherits another's
 * tables; what this clears is the method's own previous iterations' dead rows and dirty buffers,
 * whose clean-up is then not measured.
 */
public final class Settle {
  /** MariaDB: the longest wait for purge. Its history list is server-wide, and other databases' writes keep it from draining. */
  static final long PURGE_WAIT_MILLIS = 10_000;
  /** MariaDB: purge has caught up when the history list is this short (other sessions on the server add to it). */
  static final long PURGE_SETTLED = 100;

  private Settle() {}

  /**
   * Vacuums and analyzes {@code tables} (names as SQL, schema-qualified where needed, as
   * {@link BenchSql#idem} gives idem's), then checkpoints; on MariaDB analyzes them and waits for
   * purge.
   */
  public static void tables(DataSource ds, String tables) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      if (BenchSql.of(c).mariadb()) {
        settleMariaDb(st, tables.isBlank() ? allTables(st) : tables);
        return;
      }
      st.execute("VACUUM ANALYZE " + tables);
      try {
        st.execute("CHECKPOINT");
      } catch (SQLException notAllowed) {
        // CHECKPOINT needs a superuser or pg_checkpoint; without it, the vacuum alone
      }
    }
  }

  /**
   * Vacuums and analyzes every table of the database (the guards' own tables included, whatever
   * they are named), then checkpoints; on MariaDB, every table of the connection's database.
   */
  public static void database(DataSource ds) throws SQLException {
    tables(ds, "");
  }

  private static String allTables(Statement st) throws SQLException {
    List<String> names = new ArrayList<>();
    try (ResultSet rs = st.executeQuery("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
        + " AND table_type = 'BASE TABLE'")) {
      while (rs.next()) {
        names.add("`" + rs.getString(1) + "`");
      }
    }
    return String.join(", ", names);
  }

  private static void settleMariaDb(Statement st, String tables) throws SQLException {
    if (!tables.isBlank()) {
      try (ResultSet rs = st.executeQuery("ANALYZE TABLE " + tables)) {
        while (rs.next()) {
          // ANALYZE TABLE answers with a row per table; read them all so the statement completes
        }
      }
    }
    long deadline = System.nanoTime() + PURGE_WAIT_MILLIS * 1_000_000;
    while (System.nanoTime() < deadline) {
      try (ResultSet rs = st.executeQuery("SELECT `count` FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'")) {
        if (!rs.next() || rs.getLong(1) <= PURGE_SETTLED) {
          return;
        }
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
