package dev.idem.jdbc;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.testing.TestDatabase;

/**
 * A pool of one connection to a test's database that gives up after HikariCP's least timeout,
 * 250 ms: for calls that need a second connection while their transaction holds the first, which
 * such a pool cannot give (the caller closes it).
 *
 * <p>Public for idem-jdbc's test packages only (it is test code, not an API).
 */
public final class PoolOfOne {
  private PoolOfOne() {}

  /** A new pool of one connection to {@code db}, timing out after 250 ms. */
  public static HikariDataSource of(TestDatabase db) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(db.jdbcUrl());
    config.setMaximumPoolSize(1);
    config.setConnectionTimeout(250); // HikariCP's least
    return new HikariDataSource(config);
  }
}
