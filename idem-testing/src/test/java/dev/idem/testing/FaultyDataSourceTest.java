package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link FaultyDataSource} on plain JDBC and a real database (PostgreSQL, or MariaDB): which
 * commits it counts as writing, and that a kill really ends the server's connection (PostgreSQL's
 * backend, MariaDB's thread), before the commit (nothing of it in the table) or after it (the row
 * there, the caller told the connection died). Read from the database.
 */
@IdemTest(migrate = false, poolSize = 4, sql = "CREATE TABLE t (v text NOT NULL)")
class FaultyDataSourceTest {
  private static TestDatabase db;
  private static DataSource pool;
  private static FaultyDataSource faulty;
  private static boolean postgresql;

  @BeforeAll
  static void start(TestDatabase database, DataSource ds, FaultyDataSource wrapped) {
    db = database;
    pool = ds;
    faulty = wrapped;
    postgresql = db.vendor() == TestDatabase.Vendor.POSTGRESQL;
  }

  /** The server's id of the connection {@code c} is (PostgreSQL's backend pid, MariaDB's connection id). */
  private static int serverId(Connection c) throws SQLException {
    try (Statement st = c.createStatement();
        var rs = st.executeQuery(postgresql ? "SELECT pg_backend_pid()" : "SELECT CONNECTION_ID()")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /** How the watch reports a connection it ended. */
  private static String ended(int id) {
    return postgresql ? "backend " + id + " terminated" : "connection " + id + " killed";
  }

  private static long rows(String v) {
    return db.count("SELECT count(*) FROM t WHERE v = ?", v);
  }

  private static void insertInTransaction(Connection c, String v) throws SQLException {
    c.setAutoCommit(false);
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO t VALUES (?)")) {
      ps.setString(1, v);
      ps.executeUpdate();
    }
    c.commit();
  }

  @Test
  void unarmed_passesThroughAndUnwrapsToTheDriver() throws Exception {
    Class<?> driverConnection = Class.forName(postgresql ? "org.postgresql.PGConnection" : "org.mariadb.jdbc.Connection");
    try (Connection c = faulty.getConnection()) {
      assertThat(c.isWrapperFor(driverConnection)).isTrue();
      assertThat(c.unwrap(driverConnection)).isInstanceOf(driverConnection);
      assertThat(serverId(c)).isPositive();
      try (Statement st = c.createStatement()) {
        assertThat(st.getConnection()).isSameAs(c);
      }
      insertInTransaction(c, "unarmed");
    }
    assertThat(rows("unarmed")).isEqualTo(1);
    assertThat(faulty.isWrapperFor(FaultyDataSource.class)).isTrue();
  }

  @Test
  void watching_countsTheCommitsThatWroteAndOnlyThose() throws Exception {
    FaultyDataSource.Watch w = faulty.watch(0, false);
    try (Connection c = faulty.getConnection()) {
      try (Statement st = c.createStatement()) {
        st.executeQuery("SELECT count(*) FROM t").close(); // auto-commit read: no
        st.executeUpdate("INSERT INTO t VALUES ('auto')"); // auto-commit write: 1
      }
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.executeQuery("SELECT 1").close();
      }
      c.commit(); // a transaction that only read: no
      insertInTransaction(c, "tx"); // 2
      try (Statement st = c.createStatement()) {
        st.execute("INSERT INTO t VALUES ('string');\nCOMMIT"); // a string ending in COMMIT: 3
        st.executeUpdate("INSERT INTO t VALUES ('then auto-commit on')");
      }
      c.setAutoCommit(true); // ends a transaction that wrote: 4
    } finally {
      faulty.stop(w);
    }
    assertThat(w.commits).hasSize(4).satisfiesExactly(
        first -> assertThat(first).startsWith("auto-commit 'INSERT INTO t VALUES ('auto")
            .matches(".* on connection #\\d+"),
        second -> assertThat(second).startsWith("commit() on connection #"),
        third -> assertThat(third).startsWith("'INSERT INTO t VALUES ('string'); COMMIT' ending in COMMIT"),
        fourth -> assertThat(fourth).startsWith("setAutoCommit(true) on connection #"));
    assertThat(w.killed).isFalse();
    assertThat(rows("auto") + rows("tx") + rows("string") + rows("then auto-commit on")).isEqualTo(4);
  }

  @Test
  void killedBeforeCommit_nothingCommitsAndTheBackendIsGone() throws Exception {
    FaultyDataSource.Watch w = faulty.watch(1, false);
    int pid;
    try (Connection c = faulty.getConnection()) {
      pid = serverId(c);
      assertThatThrownBy(() -> insertInTransaction(c, "killed before")).isInstanceOf(SQLException.class);
    } finally {
      faulty.stop(w);
    }
    assertThat(w.killed).isTrue();
    assertThat(w.kill).isEqualTo("writing commit 1 (commit() on connection #" + w.kill.replaceAll(".*#(\\d+)\\).*", "$1")
        + ") killed before it reached the server (" + ended(pid) + ")");
    assertThat(rows("killed before")).isZero();
    assertThat(db.count(postgresql ? "SELECT count(*) FROM pg_stat_activity WHERE pid = ?"
        : "SELECT count(*) FROM information_schema.processlist WHERE id = ?", pid)).isZero();
  }

  @Test
  void killedAfterCommit_theRowIsThereAndTheCallerSeesTheConnectionDie() throws Exception {
    FaultyDataSource.Watch w = faulty.watch(2, true);
    try (Connection c = faulty.getConnection()) {
      insertInTransaction(c, "first, not killed");
      assertThatThrownBy(() -> insertInTransaction(c, "killed after"))
          .isInstanceOf(SQLException.class)
          // PostgreSQL: the backend's "terminating connection" or the socket's end; MariaDB: the
          // driver's own "connection closed" (08xxx) or the server's "Connection was killed" (70100)
          .satisfies(e -> assertThat(((SQLException) e).getSQLState()).isIn("57P01", "08006", "08000", "08S01", "70100"));
    } finally {
      faulty.stop(w);
    }
    assertThat(w.killed).isTrue();
    assertThat(w.kill).startsWith("writing commit 2 (commit() on connection #")
        .contains(postgresql ? ") killed after it committed (backend " : ") killed after it committed (connection ");
    assertThat(rows("first, not killed")).isEqualTo(1);
    assertThat(rows("killed after")).isEqualTo(1);
  }

  @Test
  void aStatementInAutoCommitKilledAfterItCommitted_isThereAndFailsForTheCaller() throws Exception {
    FaultyDataSource.Watch w = faulty.watch(1, true);
    try (Connection c = faulty.getConnection(); Statement st = c.createStatement()) {
      assertThatThrownBy(() -> st.executeUpdate("INSERT INTO t VALUES ('auto, killed after')")).isInstanceOf(SQLException.class);
    } finally {
      faulty.stop(w);
    }
    assertThat(w.kill).startsWith("writing commit 1 (auto-commit 'INSERT INTO t VALUES ('auto, killed after')' on connection #");
    assertThat(rows("auto, killed after")).isEqualTo(1);
  }

  @Test
  void sqlText_findsCommitsAndWhatCannotRunInATransaction() {
    assertThat(SqlText.endsInCommit("insert into idem_inbox values ($1)\n;\nINSERT INTO t VALUES ('x')\n;\nCOMMIT")).isTrue();
    assertThat(SqlText.endsInCommit("COMMIT;")).isTrue();
    assertThat(SqlText.onlyCommit(" commit work ")).isTrue();
    assertThat(SqlText.endsInCommit("SELECT CASE WHEN true THEN 1 END")).isFalse();
    assertThat(SqlText.endsInCommit("INSERT INTO t VALUES ('; COMMIT')")).isFalse();
    assertThat(SqlText.fitsInATransaction("UPDATE t SET v = CASE WHEN v = 'a' THEN 'b' END")).isTrue();
    assertThat(SqlText.fitsInATransaction("DO $$ BEGIN INSERT INTO t VALUES ('x'); END $$")).isTrue();
    assertThat(SqlText.fitsInATransaction("CREATE INDEX CONCURRENTLY i ON t (v)")).isFalse();
    assertThat(SqlText.fitsInATransaction("VACUUM t")).isFalse();
    assertThat(SqlText.fitsInATransaction("BEGIN; INSERT INTO t VALUES ('x')")).isFalse();
  }
}
