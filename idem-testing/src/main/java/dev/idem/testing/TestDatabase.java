package dev.idem.testing;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
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
  public synchronized HikariDataSource dataSource(int maxPoolSize) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(maxPoolSize);
    config.setMinimumIdle(0);
    config.setPoolName("idem-test-" + name + "-" + pools.size());
    HikariDataSource ds = new HikariDataSource(config);
    pools.add(ds);
    return ds;
  }

  /** A plain connection, outside any pool; the caller closes it. */
  public Connection connect() throws SQLException {
    return DriverManager.getConnection(jdbcUrl);
  }

  @Override
  public synchronized void close() {
    pools.forEach(HikariDataSource::close);
    pools.clear();
    try (Connection c = DriverManager.getConnection(server.adminUrl()); Statement st = c.createStatement()) {
      st.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    } catch (SQLException e) {
      throw new IllegalStateException("could not drop test database " + name, e);
    }
  }
}
