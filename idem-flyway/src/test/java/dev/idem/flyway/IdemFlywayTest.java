package dev.idem.flyway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.DriverManager;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Where {@link IdemFlyway} migrates on the database this run is on (PostgreSQL by default, MariaDB
 * with {@code IDEM_TEST_DATABASE=mariadb} or a MariaDB {@code IDEM_JDBC_URL}), and what it refuses
 * before writing anything; each read back from the database's catalog. The migrations run are the
 * stand-ins in this module's test resources (see them for why), each recording which vendor folder
 * it came from.
 */
class IdemFlywayTest {
  private static final boolean MARIADB = TestServer.mariadb();
  private static TestServer.Db db;
  private static DataSource ds;

  @BeforeAll
  static void start() throws SQLException {
    db = TestServer.newDatabase("test");
    ds = db.dataSource();
  }

  @AfterAll
  static void stop() throws SQLException {
    db.close();
  }

  /** Whether table {@code table} is in schema (MariaDB: database) {@code schema}. */
  private static boolean tableIn(String schema, String table) throws SQLException {
    return db.count("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" + schema + "' AND table_name = '"
        + table + "'") == 1;
  }

  private static boolean schemaExists(String schema) throws SQLException {
    return db.count("SELECT count(*) FROM information_schema.schemata WHERE schema_name = '" + schema + "'") == 1;
  }

  /** The schema a test names: on MariaDB a database on a server other runs share, so unique to this run's. */
  private static String schemaNamed(String name) {
    return MARIADB ? db.name() + "_" + name : name;
  }

  @Test
  void byDefault_idemSchemaOnPostgresql_theDataSourcesOwnDatabaseOnMariadb_fromItsVendorFolder() throws SQLException {
    IdemFlyway.migrate(ds);
    String schema = MARIADB ? db.name() : "idem";
    assertThat(tableIn(schema, "idem_keys")).isTrue();
    assertThat(tableIn(schema, "idem_schema_history")).isTrue();
    assertThat(db.count("SELECT count(*) FROM " + schema + ".idem_stand_in WHERE folder = '" + (MARIADB ? "mariadb" : "postgresql")
        + "'")).isEqualTo(1);
    long applied = db.count("SELECT count(*) FROM " + schema + ".idem_schema_history WHERE success");

    IdemFlyway.migrate(ds, null); // null is the default too; a second run applies nothing
    assertThat(db.count("SELECT count(*) FROM " + schema + ".idem_schema_history WHERE success")).isEqualTo(applied);
    assertThat(db.count("SELECT count(*) FROM " + schema + ".idem_stand_in")).isEqualTo(1);
  }

  @Test
  void aNamedSchema_isCreated_andHoldsTheTablesAndTheirHistory() throws SQLException {
    String schema = schemaNamed("payments");
    try {
      assertThat(schemaExists(schema)).isFalse();
      IdemFlyway.migrate(ds, schema);
      assertThat(tableIn(schema, "idem_keys")).isTrue();
      assertThat(tableIn(schema, "idem_schema_history")).isTrue();
      if (MARIADB) {
        assertThat(db.count("SELECT count(*) FROM " + schema + ".idem_stand_in WHERE folder = 'mariadb'")).isEqualTo(1);
      }
    } finally {
      if (MARIADB) {
        db.dropAlso(schema);
      }
    }
  }

  @Test
  void aReservedWord_isRefusedBeforeAnythingIsCreated() {
    for (String word : new String[] {"order", "select", "table"}) {
      assertThatThrownBy(() -> IdemFlyway.migrate(ds, word))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("schema '" + word + "' is a reserved word of " + (MARIADB ? "MariaDB" : "PostgreSQL")
              + "'s, which idem's migrations would have to quote: choose another schema name");
    }
  }

  @Test
  void aWordTheDatabaseDoesNotReserve_isAccepted() throws SQLException {
    // PostgreSQL: an unreserved keyword. MariaDB: a name that is no keyword at all, as any database
    // made here must be unique to this run; that the probe tells reserved from not is the test above.
    String schema = MARIADB ? db.name() + "_position" : "position";
    try {
      IdemFlyway.migrate(ds, schema);
      assertThat(tableIn(schema, "idem_keys")).isTrue();
    } finally {
      if (MARIADB) {
        db.dropAlso(schema);
      }
    }
  }

  @Test
  void aNameTheMigrationsCouldNotUseUnquoted_isRefused() {
    for (String name : new String[] {"Billing", "1st", "idem; DROP TABLE x", "a".repeat(64), ""}) {
      assertThatThrownBy(() -> IdemFlyway.migrate(ds, name))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("schema '" + name + "' is not a plain lower-case SQL identifier");
    }
    assertThatThrownBy(() -> IdemFlyway.migrate(null)).isInstanceOf(IllegalArgumentException.class).hasMessage("dataSource must not be null");
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "idem", null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("layout must not be null");
  }

  @Test
  void thePartitionedLayout_onPostgresqlIsKept_onMariadbIsRefusedBeforeAnythingIsWritten() throws SQLException {
    String schema = schemaNamed("parted");
    try {
      if (MARIADB) {
        assertThatThrownBy(() -> IdemFlyway.migrate(ds, schema, IdemFlyway.Layout.PARTITIONED))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessage("Layout.PARTITIONED is PostgreSQL's only (its tables are partitioned by PostgreSQL's declarative partitioning),"
                + " and this DataSource is on MariaDB: use Layout.DEFAULT");
        assertThat(schemaExists(schema)).isFalse();
        return;
      }
      IdemFlyway.migrate(ds, schema, IdemFlyway.Layout.PARTITIONED);
      assertThat(db.count("SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = '" + schema + "' AND c.relname = 'idem_keys' AND c.relkind = 'p'")).isEqualTo(1);
      IdemFlyway.migrate(ds, schema, IdemFlyway.Layout.PARTITIONED); // the same layout again: nothing to do
      assertThatThrownBy(() -> IdemFlyway.migrate(ds, schema))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("schema '" + schema + "' holds idem's tables in the partitioned layout, and migrate was asked for"
              + " the default one");
    } finally {
      if (MARIADB) {
        db.dropAlso(schema);
      }
    }
  }

  @Test
  void onMariadb_connectionsInNoDatabase_areToldToNameOne_andANamedSchemaStillWorks() throws SQLException {
    if (!MARIADB) {
      return; // a PostgreSQL connection is always in a database
    }
    DataSource nowhere = TestServer.Db.dataSource(TestServer.urlOf(""));
    assertThatThrownBy(() -> IdemFlyway.migrate(nowhere))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("the DataSource's connections are in no database (their JDBC URL names none)");
    String schema = schemaNamed("named");
    try {
      IdemFlyway.migrate(nowhere, schema);
      assertThat(tableIn(schema, "idem_keys")).isTrue();
    } finally {
      db.dropAlso(schema);
    }
  }

  @Test
  void onMariadb_aDatabaseTheMigrationsCouldNotNameUnquoted_isRefusedAsTheDefault() throws SQLException {
    if (!MARIADB) {
      return; // PostgreSQL's default is the schema idem, whatever the database is called
    }
    String odd = db.name() + "_Odd";
    try (var c = DriverManager.getConnection(db.url()); var st = c.createStatement()) {
      st.execute("CREATE DATABASE `" + odd + "`");
    }
    try {
      assertThatThrownBy(() -> IdemFlyway.migrate(TestServer.Db.dataSource(TestServer.urlOf(odd))))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("the DataSource's database '" + odd + "' (where idem's tables go when no schema is named) is not a plain"
              + " lower-case SQL identifier");
      assertThat(db.count("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" + odd + "'")).isZero();
    } finally {
      try (var c = DriverManager.getConnection(db.url()); var st = c.createStatement()) {
        st.execute("DROP DATABASE `" + odd + "`");
      }
    }
  }
}
