package dev.idem.spring.boot;

import dev.idem.jdbc.Idem;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import javax.sql.DataSource;

/**
 * Which database the application's DataSource is on, as the start-up checks need to know it: what
 * to look for idem's tables with, which database its tables go in by default, and which Flyway
 * module to name when one is missing. Asked of the driver at start-up only; idem itself tells the
 * database apart on its own.
 *
 * @param vendor the database, or null if it is none idem runs on (MySQL among them: idem refuses it
 *     until it is tested)
 * @param product the product name and version the driver gives, for messages
 * @param database MariaDB: the database the connections are in ({@code DATABASE()}), where idem's
 *     tables go when {@code idem.schema} is not set; null if the URL names none, and on PostgreSQL
 */
record StartupDatabase(Vendor vendor, String product, String database) {

  /** The databases idem runs on. */
  enum Vendor {
    POSTGRESQL("PostgreSQL", "postgresql", "org.flywaydb:flyway-database-postgresql",
        "org.flywaydb.database.postgresql.PostgreSQLDatabaseType"),
    MARIADB("MariaDB", "mariadb", "org.flywaydb:flyway-mysql", "org.flywaydb.database.mysql.mariadb.MariaDBDatabaseType");

    /** The database's name as users know it. */
    final String product;
    /** The folder of idem's migrations ({@code {vendor}} in {@link Idem#MIGRATIONS}). */
    final String folder;
    /** Flyway's module for this database (Flyway 10 and later ship each database apart from flyway-core). */
    final String flywayModule;
    /** A class of that module: Flyway's support for this database is on the class path when it is. */
    final String flywayDatabaseType;

    Vendor(String product, String folder, String flywayModule, String flywayDatabaseType) {
      this.product = product;
      this.folder = folder;
      this.flywayModule = flywayModule;
      this.flywayDatabaseType = flywayDatabaseType;
    }

    /** idem's migrations for this database, as a Flyway location. */
    String migrations() {
      return Idem.MIGRATIONS.replace("{vendor}", folder);
    }

    /** Whether Flyway's module for this database is on {@code loader}'s class path. */
    boolean flywaySupportPresent(ClassLoader loader) {
      try {
        Class.forName(flywayDatabaseType, false, loader);
        return true;
      } catch (ClassNotFoundException | LinkageError e) {
        return false;
      }
    }
  }

  /**
   * The database behind {@code dataSource}, read on a connection of its own.
   *
   * @throws IllegalStateException if no connection could be had or asked
   */
  static StartupDatabase of(DataSource dataSource) {
    try (Connection c = dataSource.getConnection()) {
      return of(c);
    } catch (SQLException e) {
      throw new IllegalStateException("could not ask the DataSource which database it is on: " + e.getMessage(), e);
    }
  }

  /**
   * The database {@code c} is on, told as idem tells it (a MariaDB server is MariaDB whichever
   * driver reports it: MySQL's Connector/J names it MySQL, with MariaDB in its version); ends the
   * read's transaction if the connection is not in auto-commit.
   */
  static StartupDatabase of(Connection c) throws SQLException {
    DatabaseMetaData meta = c.getMetaData();
    String name = String.valueOf(meta.getDatabaseProductName());
    String version = String.valueOf(meta.getDatabaseProductVersion());
    Vendor vendor = name.toLowerCase(Locale.ROOT).contains("postgres") ? Vendor.POSTGRESQL
        : (name + version).toLowerCase(Locale.ROOT).contains("mariadb") ? Vendor.MARIADB
        : null;
    String database = null;
    if (vendor == Vendor.MARIADB) {
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT DATABASE()")) {
        database = rs.next() ? rs.getString(1) : null;
      }
    }
    if (!c.getAutoCommit()) {
      c.rollback(); // a pool in manual commit: end the read's transaction
    }
    return new StartupDatabase(vendor, name + " " + version, database);
  }

  /**
   * Refuses a database idem does not run on, naming it.
   *
   * @throws IdemSetupException if {@link #vendor} is null
   */
  Vendor requireSupported() {
    if (vendor == null) {
      throw new IdemSetupException("idem runs on PostgreSQL and MariaDB 10.11+, and the application's DataSource is on "
          + product + (product.toLowerCase(Locale.ROOT).contains("mysql") ? " (MySQL is not yet tested, so refused)" : ""),
          "Point spring.datasource.url at a PostgreSQL or MariaDB database.");
    }
    return vendor;
  }

  /**
   * MariaDB: the database idem's tables go in, {@code schema} (idem.schema) if set, else the one the
   * connections are in.
   *
   * @throws IdemSetupException if neither names one
   */
  String databaseFor(String schema) {
    if (schema != null) {
      return schema;
    }
    if (database == null) {
      throw new IdemSetupException("idem.schema is not set, so idem's tables go in the DataSource's own database on"
          + " MariaDB, and its connections are in no database (spring.datasource.url names none)",
          "Name the database in spring.datasource.url, or set idem.schema to the database idem's tables are in.");
    }
    return database;
  }
}
