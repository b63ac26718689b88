package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * {@link TestDatabase} on the database this run is on (PostgreSQL by default, MariaDB when chosen):
 * the database it makes, what it runs, the pools it gives, and that closing it drops the database,
 * read from the server's own catalog.
 */
class TestDatabaseTest {
  private static final boolean MARIADB = TestDatabase.configuredVendor() == TestDatabase.Vendor.MARIADB;

  /** Whether database {@code name} exists, asked on another database of the same server. */
  private static boolean exists(TestDatabase other, String name) {
    return other.count(MARIADB ? "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?"
        : "SELECT count(*) FROM pg_database WHERE datname = ?", name) == 1;
  }

  /**
   * A long hint is cut to 63 characters; the cut must keep the "idem_" prefix, since a name left
   * starting with a digit is a syntax error in the unquoted CREATE DATABASE.
   */
  @Test
  void aLongHintWithDigitsStillMakesADatabaseNamedAsIdemsOwn() {
    String hint = "ParameterizedRun_" + "2024".repeat(15);
    try (TestDatabase db = TestDatabase.newDatabase(hint)) {
      assertThat(db.name()).hasSizeLessThanOrEqualTo(63).startsWith("idem_parameterizedrun_2024");
      assertThat(exists(db, db.name())).isTrue();
      assertThat(db.vendor()).isEqualTo(MARIADB ? TestDatabase.Vendor.MARIADB : TestDatabase.Vendor.POSTGRESQL);
      assertThat(db.kind()).isNotNull();
      assertThat(db.jdbcUrl()).startsWith(MARIADB ? "jdbc:ma" : "jdbc:postgresql:").contains("/" + db.name());
    }
  }

  @Test
  void executeRunsSeveralStatements_countReadsWithParameters_andTheDatabaseIsTheConnectionsOwn() throws Exception {
    try (TestDatabase db = TestDatabase.newDatabase("execute")) {
      db.execute("CREATE TABLE notes (id int PRIMARY KEY, body varchar(20) NOT NULL); INSERT INTO notes VALUES (1, 'a');"
          + " INSERT INTO notes VALUES (2, 'b')");
      assertThat(db.count("SELECT count(*) FROM notes")).isEqualTo(2);
      assertThat(db.count("SELECT count(*) FROM notes WHERE body = ? AND id > ?", "b", 1)).isEqualTo(1);
      assertThatThrownBy(() -> db.count("SELECT id FROM notes WHERE id = 3")).isInstanceOf(IllegalStateException.class)
          .hasMessage("no row from: SELECT id FROM notes WHERE id = 3");
      try (Connection c = db.connect(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery(MARIADB ? "SELECT DATABASE()" : "SELECT current_database()")) {
        rs.next();
        assertThat(rs.getString(1)).isEqualTo(db.name());
      }
    }
  }

  @Test
  void aPoolAtAnIsolationLevel_runsItsTransactionsAtThatLevel() throws Exception {
    try (TestDatabase db = TestDatabase.newDatabase("isolation")) {
      DataSource serializable = db.dataSource(2, "TRANSACTION_SERIALIZABLE");
      try (Connection c = serializable.getConnection(); Statement st = c.createStatement()) {
        c.setAutoCommit(false);
        try (ResultSet rs = st.executeQuery(MARIADB ? "SELECT @@tx_isolation" : "SHOW transaction_isolation")) {
          rs.next();
          assertThat(rs.getString(1)).isEqualToIgnoringCase(MARIADB ? "SERIALIZABLE" : "serializable");
        }
        c.commit();
      }
    }
  }

  @Test
  void nextvalCalls_countsASequencesValuesOnPostgresql_andIsRefusedOnMariadb() {
    try (TestDatabase db = TestDatabase.newDatabase("nextval")) {
      db.execute("CREATE SEQUENCE sends");
      if (MARIADB) {
        assertThatThrownBy(() -> db.nextvalCalls("sends")).isInstanceOf(UnsupportedOperationException.class)
            .hasMessageStartingWith("nextvalCalls is PostgreSQL only");
        return;
      }
      assertThat(db.nextvalCalls("sends")).isZero();
      db.execute("SELECT nextval('sends'); SELECT nextval('sends')");
      assertThat(db.nextvalCalls("sends")).isEqualTo(2);
    }
  }

  /** As PostgreSQL's DROP DATABASE ... WITH (FORCE): a connection a test left open does not keep it. */
  @Test
  void closeDropsTheDatabase_evenWithAConnectionLeftOpenInATransaction() throws Exception {
    try (TestDatabase witness = TestDatabase.newDatabase("witness")) {
      TestDatabase db = TestDatabase.newDatabase("dropped");
      db.execute("CREATE TABLE t (v int NOT NULL)");
      Connection left = db.connect();
      left.setAutoCommit(false);
      try (Statement st = left.createStatement()) {
        st.executeUpdate("INSERT INTO t VALUES (1)"); // holds the table's locks until it ends
      }
      String schemaDb = MARIADB ? db.schemaDatabase("extra") : null;
      if (MARIADB) {
        witness.execute("CREATE DATABASE " + schemaDb);
      }
      db.close();
      assertThat(exists(witness, db.name())).isFalse();
      if (MARIADB) {
        assertThat(schemaDb).startsWith(db.name()).endsWith("_extra");
        assertThat(exists(witness, schemaDb)).as("the database standing for a schema goes with it").isFalse();
      }
      assertThat(left.isValid(2)).isFalse();
    }
  }
}
