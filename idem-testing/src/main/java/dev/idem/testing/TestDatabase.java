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

/**
 * One database of its own on the {@link TestPostgres} server. Pools made by {@link #dataSource}
 * are closed, and the database dropped, by {@link #close()}.
 */
public final class TestDatabase implements AutoCloseable {
  private final TestPostgres.Server server;
  private final String name;
  private final String jdbcUrl;
  private final List<HikariDataSource> pools = new ArrayList<>();
  private HikariDataSource helpers;

  TestDatabase(TestPostgres.Server server, String name, String jdbcUrl) {
    this.server = server;
    this.name = name;
    this.jdbcUrl = jdbcUrl;
  }

  public String name() {
    return name;
  }

  /** A JDBC URL with credentials for this database. */
  public String jdbcUrl() {
    return jdbcUrl;
  }

  public TestPostgres.Kind kind() {
    return server.kind();
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
   * A new HikariCP pool of at most {@code maxPoolSize} connections whose URL carries pgjdbc's
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
   * The number a query returns in its first column of its first row (e.g. {@code SELECT count(*)
   * FROM payments WHERE order_id = ?}): how tests read what was committed.
   */
  /**
   * How many values {@code sequence} has handed out ({@code nextval} calls, from its start at 1):
   * a count of how often a statement calling it reached the server, committed or not, because
   * PostgreSQL never rolls a sequence back.
   */
  public long nextvalCalls(String sequence) {
    return count("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM " + sequence);
  }

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

  @Override
  public synchronized void close() {
    pools.forEach(HikariDataSource::close);
    pools.clear();
    helpers = null;
    try (Connection c = DriverManager.getConnection(server.adminUrl()); Statement st = c.createStatement()) {
      st.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    } catch (SQLException e) {
      throw new IllegalStateException("could not drop test database " + name, e);
    }
  }
}
