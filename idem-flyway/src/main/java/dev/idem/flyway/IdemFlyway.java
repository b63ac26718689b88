package dev.idem.flyway;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.flywaydb.core.Flyway;

/**
 * Runs idem's migrations with Flyway, in one call, on PostgreSQL or on MariaDB (and MySQL):
 *
 * <pre>{@code
 * IdemFlyway.migrate(dataSource);            // the default: schema "idem" on PostgreSQL, the
 *                                            // DataSource's own database on MariaDB
 * IdemFlyway.migrate(dataSource, "payments"); // a schema of your choice: build Idem with the same
 * }</pre>
 *
 * <p>The database is read from the {@code DataSource}'s connections: PostgreSQL, MariaDB or MySQL;
 * any other is refused with an {@link IllegalArgumentException} before anything is written. On
 * MariaDB and MySQL a schema is a database: by default idem's tables go in the connection's current
 * database ({@code DATABASE()}, the one its JDBC URL names), and a schema named here is another
 * database on the same server, created if missing.
 *
 * <p>The schema is named twice, here and at {@code Idem.builder(dataSource).schema(...)}: an
 * {@code Idem} whose schema holds no idem tables refuses its first call with a data-access error
 * naming the schema and this call, before it writes anything.
 *
 * <p>The migrations are SQL files in idem-jdbc, at {@code Idem.MIGRATIONS}, one folder per database
 * ({@code {vendor}}: {@code postgresql}, or {@code mariadb} for MariaDB and MySQL alike, which this
 * class fills in itself; plain Flyway does not). They create the schema if it is missing and record
 * themselves in their own history table ({@code Idem.HISTORY_TABLE}), so they never mix with your
 * service's migrations. Safe to call on every start and from several processes at once: Flyway
 * takes a lock. To run them with your own Flyway instead, configure it with these location (its
 * {@code {vendor}} replaced by your database's folder), table and schema: {@code Idem.MIGRATIONS},
 * {@code Idem.HISTORY_TABLE} and {@code Idem.DEFAULT_SCHEMA} (idem-jdbc's entry point, the one
 * place these constants are published).
 *
 * <p>The key table and the inbox come in two layouts, chosen at the first migration: {@link
 * Layout#DEFAULT}, or {@link Layout#PARTITIONED} by the time of UUIDv7 keys, which also needs
 * {@code Idem.PARTITIONED_MIGRATIONS} among your own Flyway's locations. The partitioned layout is
 * PostgreSQL's only.
 *
 * <p>Idem's schema name is used unquoted by the migrations: lower-case letters, digits and
 * underscores, not starting with a digit, at most 63, and not a word the database reserves.
 */
public final class IdemFlyway {
  // Copies of Idem's public constants (MIGRATIONS, PARTITIONED_MIGRATIONS, HISTORY_TABLE,
  // DEFAULT_SCHEMA), kept private: this module cannot depend on idem-jdbc, whose tests migrate with
  // it (a reactor cycle). IdemTest checks that a Flyway configured with Idem's finds these applied.
  private static final String MIGRATIONS = "classpath:dev/idem/jdbc/migration/{vendor}";

  private static final String PARTITIONED_MIGRATIONS = "classpath:dev/idem/jdbc/migration-partitioned";

  /**
   * How idem keeps its key table and inbox, chosen at the first migration (docs/scale.md). The code
   * is the same for both; only the tables differ.
   */
  public enum Layout {
    /** One table each; expiry deletes rows in batches. Accepts any key. The only one on MariaDB and MySQL. */
    DEFAULT,
    /**
     * Partitioned by the time the key carries, one partition a day, created ahead and dropped whole
     * once every row in it is past its window ({@code idem.operations().maintainPartitions()}).
     * Accepts only keys (and inbox message ids) that begin with a UUIDv7; refuses others with an
     * {@link IllegalArgumentException}. Chosen on empty tables only: the migration refuses to
     * replace tables that have rows. PostgreSQL only.
     */
    PARTITIONED
  }

  private static final String HISTORY_TABLE = "idem_schema_history";

  private static final String DEFAULT_SCHEMA = "idem";

  private static final Pattern NAME = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

  /** MariaDB's and MySQL's error for SQL it cannot parse (ER_PARSE_ERROR). */
  private static final int PARSE_ERROR = 1064;

  private IdemFlyway() {}

  /** The databases idem's migrations are written for; {@code folder} is the {@code {vendor}} in {@code Idem.MIGRATIONS}. */
  private enum Vendor {
    POSTGRESQL("PostgreSQL", "postgresql"),
    MARIADB("MariaDB", "mariadb"),
    // MySQL runs the SQL MariaDB and MySQL share (issue 35): the same folder.
    MYSQL("MySQL", "mariadb");

    final String product;
    final String folder;

    Vendor(String product, String folder) {
      this.product = product;
      this.folder = folder;
    }
  }

  /**
   * Applies idem's migrations to the default schema: {@code idem} ({@code Idem.DEFAULT_SCHEMA}) on
   * PostgreSQL; on MariaDB and MySQL the database the {@code DataSource}'s connections are in.
   *
   * @throws IllegalArgumentException as {@link #migrate(DataSource, String)}, or on MariaDB and
   *     MySQL if the connections are in no database (their URL names none)
   */
  public static void migrate(DataSource dataSource) {
    migrate(dataSource, null, Layout.DEFAULT);
  }

  /**
   * Applies idem's migrations to {@code schema}, created if missing; on MariaDB and MySQL {@code
   * schema} is a database. Null is the default schema, as {@link #migrate(DataSource)}.
   *
   * @throws IllegalArgumentException before anything is created, if {@code dataSource} is null or
   *     on a database other than PostgreSQL, MariaDB and MySQL, or {@code schema} is not a
   *     lower-case plain identifier or is a word the database reserves (such as {@code order}),
   *     which the migrations would have to quote
   * @throws IllegalStateException if the database could not be asked which it is, or whether the
   *     name is reserved
   */
  public static void migrate(DataSource dataSource, String schema) {
    migrate(dataSource, schema, Layout.DEFAULT);
  }

  /**
   * Applies idem's migrations to {@code schema}, created if missing, in {@code layout}. Choose the
   * layout at the first migration and pass the same one on every later call: a database migrated
   * in one layout is not turned into the other.
   *
   * @throws IllegalArgumentException as {@link #migrate(DataSource, String)}, or if {@code layout}
   *     is null, or {@link Layout#PARTITIONED} on MariaDB or MySQL (before anything is written)
   * @throws IllegalStateException before anything is changed, if idem's tables in {@code schema}
   *     are in the other layout
   */
  public static void migrate(DataSource dataSource, String schema, Layout layout) {
    if (layout == null) {
      throw new IllegalArgumentException("layout must not be null: Layout.DEFAULT or Layout.PARTITIONED");
    }
    if (dataSource == null) {
      throw new IllegalArgumentException("dataSource must not be null");
    }
    if (schema != null && !NAME.matcher(schema).matches()) {
      throw new IllegalArgumentException("schema '" + schema + "' is not a plain lower-case SQL identifier: use 1 to 63"
          + " lower-case letters, digits or underscores, not starting with a digit (idem's migrations name it unquoted)");
    }
    Server server = server(dataSource);
    if (server.vendor != Vendor.POSTGRESQL && layout == Layout.PARTITIONED) {
      throw new IllegalArgumentException("Layout.PARTITIONED is PostgreSQL's only (its tables are partitioned by PostgreSQL's"
          + " declarative partitioning), and this DataSource is on " + server.vendor.product + ": use Layout.DEFAULT");
    }
    String what = "schema '" + schema + "'";
    if (schema == null) {
      if (server.vendor == Vendor.POSTGRESQL) {
        schema = DEFAULT_SCHEMA;
      } else if (server.database == null) {
        throw new IllegalArgumentException("the DataSource's connections are in no database (their JDBC URL names none), and"
            + " on " + server.vendor.product + " idem's tables go in that database by default: name one in the URL, or pass"
            + " the schema (a database on " + server.vendor.product + ") to migrate");
      } else {
        schema = server.database;
        what = "the DataSource's database '" + schema + "' (where idem's tables go when no schema is named)";
        // Named by the user, not here; still the migrations name it unquoted, so it is held to the
        // same rules, and refused before a migration could fail half-way (MariaDB's DDL is not
        // transactional).
        if (!NAME.matcher(schema).matches()) {
          throw new IllegalArgumentException(what + " is not a plain lower-case SQL identifier, which idem's migrations name"
              + " unquoted: pass a schema (a database on " + server.vendor.product + ") of 1 to 63 lower-case letters, digits or"
              + " underscores, not starting with a digit");
        }
      }
    }
    if (!schema.equals(DEFAULT_SCHEMA) && reserved(dataSource, server.vendor, schema)) {
      throw new IllegalArgumentException(what + " is a reserved word of " + server.vendor.product + "'s, which"
          + " idem's migrations would have to quote: choose another schema name");
    }
    if (server.vendor == Vendor.POSTGRESQL) {
      Layout existing = existingLayout(dataSource, schema);
      if (existing != null && existing != layout) {
        throw new IllegalStateException("schema '" + schema + "' holds idem's tables in the " + existing.name().toLowerCase(java.util.Locale.ROOT)
            + " layout, and migrate was asked for the " + layout.name().toLowerCase(java.util.Locale.ROOT) + " one: the layout is chosen at the"
            + " first migration and kept; pass Layout." + existing + " (moving an installation between layouts is the manual procedure"
            + " in docs/scale.md)");
      }
    }
    String migrations = MIGRATIONS.replace("{vendor}", server.vendor.folder);
    Flyway.configure(IdemFlyway.class.getClassLoader())
        .dataSource(dataSource)
        .schemas(schema)
        .defaultSchema(schema)
        .createSchemas(true)
        .table(HISTORY_TABLE)
        // MariaDB: idem's tables go in the application's own database by default, which holds the
        // application's tables already; Flyway refuses a non-empty schema without its history table
        // unless told to baseline. Version 0, below idem's V1, so every migration still runs.
        .baselineOnMigrate(server.vendor != Vendor.POSTGRESQL)
        .baselineVersion("0")
        .locations(layout == Layout.PARTITIONED ? new String[] {migrations, PARTITIONED_MIGRATIONS} : new String[] {migrations})
        .load()
        .migrate();
  }

  /** Which database a DataSource is on, and (MariaDB, MySQL) the database its connections are in. */
  private record Server(Vendor vendor, String database) {}

  /**
   * The database behind {@code dataSource}, as its driver names the product.
   *
   * @throws IllegalArgumentException if it is none idem's migrations are written for
   * @throws IllegalStateException if no connection could be had or asked
   */
  private static Server server(DataSource dataSource) {
    try (Connection c = dataSource.getConnection()) {
      String product = c.getMetaData().getDatabaseProductName();
      Vendor vendor = null;
      for (Vendor v : Vendor.values()) {
        if (v.product.equalsIgnoreCase(product)) {
          vendor = v;
        }
      }
      if (vendor == null) {
        throw new IllegalArgumentException("idem's migrations are written for PostgreSQL, MariaDB and MySQL, and this"
            + " DataSource is on " + product);
      }
      String database = null;
      if (vendor != Vendor.POSTGRESQL) {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT DATABASE()")) {
          database = rs.next() ? rs.getString(1) : null;
        }
      }
      if (!c.getAutoCommit()) {
        c.rollback(); // a pool in manual commit: end the read's transaction
      }
      return new Server(vendor, database);
    } catch (SQLException e) {
      throw new IllegalStateException("could not ask the DataSource which database it is on: " + e.getMessage(), e);
    }
  }
  /**
   * The layout of idem's key table in {@code schema} (partitioned or not, as PostgreSQL's catalog
   * says), or null if there is none yet. A key table from before the layouts existed is DEFAULT.
   */
  private static Layout existingLayout(DataSource dataSource, String schema) {
    Boolean partitioned = readFlag(dataSource, "SELECT c.relkind = 'p' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        + " ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = 'idem_keys'", schema,
        "could not read the layout of idem's tables in schema '" + schema + "'");
    return partitioned == null ? null : partitioned ? Layout.PARTITIONED : Layout.DEFAULT;
  }

  /**
   * Whether {@code word} cannot name a schema unquoted. PostgreSQL: its reserved and
   * type/function-name keywords (catcode R and T); an unreserved or column-name keyword (position,
   * time) can. MariaDB and MySQL: whatever its parser refuses as a database name, asked of the server
   * itself (its list of reserved words changes with the version and the SQL mode, and MariaDB's
   * information_schema.KEYWORDS does not tell reserved from not): a query naming the word alone as
   * a table, which reads and writes nothing, fails with a syntax error only if the word is
   * reserved. (Alone: a word after or before a dot, as in {@code order.idem_keys}, parses even
   * when reserved, yet {@code CREATE DATABASE order} does not.)
   */
  private static boolean reserved(DataSource dataSource, Vendor vendor, String word) {
    if (vendor == Vendor.POSTGRESQL) {
      return Boolean.TRUE.equals(readFlag(dataSource,
          "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_get_keywords() WHERE word = ? AND catcode IN ('R', 'T'))", word,
          "could not check schema name '" + word + "' against PostgreSQL's keywords"));
    }
    // word matched NAME (letters, digits, underscores): safe to splice into the SQL.
    try (Connection c = dataSource.getConnection(); Statement st = c.createStatement()) {
      try {
        st.executeQuery("SELECT 1 FROM " + word + " WHERE 1 = 0").close();
        return false; // a table of that name exists: the name parsed
      } catch (SQLException e) {
        if (e.getErrorCode() == PARSE_ERROR) {
          return true;
        }
        if (e.getSQLState() != null && e.getSQLState().startsWith("08")) {
          throw e; // the connection failed: nothing was learned about the word
        }
        return false; // no such table, no database selected, or no right to it: the name itself parsed
      } finally {
        if (!c.getAutoCommit()) {
          c.rollback();
        }
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not check schema name '" + word + "' against " + vendor.product + "'s reserved words: "
          + e.getMessage(), e);
    }
  }

  /**
   * The first column of the first row {@code sql} returns for {@code arg}, or null if none, read on
   * a connection of its own.
   *
   * @throws IllegalStateException {@code failure}, with the database's reason, if it could not be read
   */
  private static Boolean readFlag(DataSource dataSource, String sql, String arg, String failure) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, arg);
      try (ResultSet rs = ps.executeQuery()) {
        Boolean flag = rs.next() ? rs.getBoolean(1) : null;
        if (!c.getAutoCommit()) {
          c.rollback(); // a pool in manual commit: end the read's transaction
        }
        return flag;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(failure + ": " + e.getMessage(), e);
    }
  }
}
