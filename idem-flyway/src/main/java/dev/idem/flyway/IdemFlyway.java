package dev.idem.flyway;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.flywaydb.core.Flyway;

/**
 * Runs idem's migrations with Flyway, in one call:
 *
 * <pre>{@code
 * IdemFlyway.migrate(dataSource);            // schema "idem"
 * IdemFlyway.migrate(dataSource, "payments"); // a schema of your choice: build Idem with the same
 * }</pre>
 *
 * <p>The schema is named twice, here and at {@code Idem.builder(dataSource).schema(...)}: an
 * {@code Idem} whose schema holds no idem tables refuses its first call with a data-access error
 * (SQLSTATE 42P01) naming the schema and this call, before it writes anything.
 *
 * <p>The migrations are SQL files in idem-jdbc, at {@code Idem.MIGRATIONS}; they create the schema if it
 * is missing and record themselves in their own history table ({@code Idem.HISTORY_TABLE}), so they
 * never mix with your service's migrations. Safe to call on every start and from several processes
 * at once: Flyway takes a lock. To run them with your own Flyway instead, configure it with these
 * location, table and schema: {@code Idem.MIGRATIONS}, {@code Idem.HISTORY_TABLE} and {@code
 * Idem.DEFAULT_SCHEMA} (idem-jdbc's entry point, the one place these constants are published).
 *
 * <p>The key table and the inbox come in two layouts, chosen at the first migration: {@link
 * Layout#DEFAULT}, or {@link Layout#PARTITIONED} by the time of UUIDv7 keys, which also needs
 * {@code Idem.PARTITIONED_MIGRATIONS} among your own Flyway's locations.
 *
 * <p>Idem's schema name is used unquoted by the migrations: lower-case letters, digits and
 * underscores, not starting with a digit, at most 63, and not a word PostgreSQL reserves.
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
    /** One table each; expiry deletes rows in batches. Accepts any key. */
    DEFAULT,
    /**
     * Partitioned by the time the key carries, one partition a day, created ahead and dropped whole
     * once every row in it is past its window ({@code idem.operations().maintainPartitions()}).
     * Accepts only keys (and inbox message ids) that begin with a UUIDv7; refuses others with an
     * {@link IllegalArgumentException}. Chosen on empty tables only: the migration refuses to
     * replace tables that have rows.
     */
    PARTITIONED
  }

  private static final String HISTORY_TABLE = "idem_schema_history";

  private static final String DEFAULT_SCHEMA = "idem";

  private static final Pattern NAME = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

  private IdemFlyway() {}

  /** Applies idem's migrations to the schema {@code idem} ({@code Idem.DEFAULT_SCHEMA}). */
  public static void migrate(DataSource dataSource) {
    migrate(dataSource, DEFAULT_SCHEMA);
  }

  /**
   * Applies idem's migrations to {@code schema}, created if missing.
   *
   * @throws IllegalArgumentException before anything is created, if {@code dataSource} is null or
   *     {@code schema} is not a lower-case plain identifier or is a reserved word of PostgreSQL's
   *     (such as {@code order}), which the migrations would have to quote
   * @throws IllegalStateException if the database could not be asked whether the name is reserved
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
   *     is null
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
    if (schema == null || !NAME.matcher(schema).matches()) {
      throw new IllegalArgumentException("schema '" + schema + "' is not a plain lower-case SQL identifier: use 1 to 63"
          + " lower-case letters, digits or underscores, not starting with a digit (idem's migrations name it unquoted)");
    }
    if (reserved(dataSource, schema)) {
      throw new IllegalArgumentException("schema '" + schema + "' is a reserved word of PostgreSQL's, which idem's migrations"
          + " would have to quote: choose another schema name");
    }
    Layout existing = existingLayout(dataSource, schema);
    if (existing != null && existing != layout) {
      throw new IllegalStateException("schema '" + schema + "' holds idem's tables in the " + existing.name().toLowerCase(java.util.Locale.ROOT)
          + " layout, and migrate was asked for the " + layout.name().toLowerCase(java.util.Locale.ROOT) + " one: the layout is chosen at the"
          + " first migration and kept; pass Layout." + existing + " (moving an installation between layouts is the manual procedure"
          + " in docs/scale.md)");
    }
    Flyway.configure(IdemFlyway.class.getClassLoader())
        .dataSource(dataSource)
        .schemas(schema)
        .defaultSchema(schema)
        .createSchemas(true)
        .table(HISTORY_TABLE)
        .locations(layout == Layout.PARTITIONED
            ? new String[] {vendorMigrations(dataSource), PARTITIONED_MIGRATIONS} : new String[] {vendorMigrations(dataSource)})
        .load()
        .migrate();
  }

  /**
   * {@link #MIGRATIONS} with its {@code {vendor}} resolved for the database {@code dataSource} is
   * on (Spring Boot resolves the placeholder in its own Flyway's locations; Flyway itself does not).
   */
  private static String vendorMigrations(DataSource dataSource) {
    try (java.sql.Connection c = dataSource.getConnection()) {
      String product = c.getMetaData().getDatabaseProductName().toLowerCase(java.util.Locale.ROOT);
      return MIGRATIONS.replace("{vendor}", product.contains("mariadb") ? "mariadb" : "postgresql");
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException("could not tell which database the DataSource is on: " + e.getMessage(), e);
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
   * Whether {@code word} cannot name a schema unquoted: PostgreSQL's reserved and type/function-name
   * keywords (catcode R and T). An unreserved or column-name keyword (position, time) can.
   */
  private static boolean reserved(DataSource dataSource, String word) {
    return Boolean.TRUE.equals(readFlag(dataSource,
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_get_keywords() WHERE word = ? AND catcode IN ('R', 'T'))", word,
        "could not check schema name '" + word + "' against PostgreSQL's keywords"));
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
