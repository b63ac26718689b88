package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import java.util.Map;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/**
 * {@link IdemTest} as a user meets it: the annotated classes below run through JUnit's own engine,
 * and the database they were given is read afterwards, from outside, on the same server.
 */
class IdemTestExtensionTest {
  /** What the classes under test saw, for the assertions after they ran. */
  static final List<String> databases = new ArrayList<>();
  static final List<Object> injected = new ArrayList<>();
  static final List<String> innerDatabases = new ArrayList<>();

  @IdemTest(poolSize = 3, sql = "CREATE TABLE payments (order_id text NOT NULL)")
  static class PaymentsTest {
    final TestDatabase fromConstructor;

    PaymentsTest(TestDatabase db) {
      this.fromConstructor = db;
    }

    @Test
    void oneRowPerOrder(Idem idem, DataSource ds, TestDatabase db) throws Exception {
      databases.add(db.name());
      injected.add(idem);
      injected.add(ds);
      assertThat(fromConstructor).isSameAs(db);
      IdempotentExecutor pay = idem.executor().build();
      for (int copy = 0; copy < 2; copy++) {
        pay.execute(IdempotencyKey.of("shop", "order-1"), Fingerprint.ofFields(Map.of("order", "order-1")), Codec.utf8(), tx -> {
          tx.dsl().execute("INSERT INTO payments VALUES ('order-1')");
          return "paid";
        });
      }
      assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = 'order-1'")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys")).isEqualTo(1);
    }

    @Test
    void theSameFixtureInEveryTest(Idem idem, DataSource ds, FaultyDataSource faulty) {
      injected.add(idem);
      injected.add(ds);
      assertThat(faulty.target()).as("the wrapper around the class's own pool").isSameAs(ds);
    }

    @Nested
    class Inner {
      @Test
      void sharesTheEnclosingDatabase(TestDatabase db) {
        databases.add(db.name());
      }
    }

    @Nested
    @IdemTest(migrate = false)
    class InnerWithItsOwn {
      @Test
      void getsADatabaseOfItsOwn(TestDatabase db) {
        innerDatabases.add(db.name());
        // on MariaDB idem's tables would be in the class's database itself
        assertThat(db.count(db.vendor() == TestDatabase.Vendor.MARIADB
            ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = database()"
            : "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'idem'")).isZero();
      }
    }
  }

  @IdemTest(migrate = false, schema = "elsewhere")
  static class WithoutMigrations {
    @Test
    void noIdemTables(TestDatabase db) {
      databases.add(db.name());
      // on MariaDB idem's tables would be in the class's database itself, or in a database standing for "elsewhere"
      assertThat(db.count(db.vendor() == TestDatabase.Vendor.MARIADB
          ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = database() OR table_schema LIKE concat(database(), '%elsewhere')"
          : "SELECT count(*) FROM information_schema.tables WHERE table_schema IN ('idem', 'elsewhere')")).isZero();
    }
  }

  @IdemTest(poolSize = 0)
  static class BadPool {
    @Test
    void neverRuns() {}
  }

  @Test
  void aClassGetsAMigratedDatabaseOfItsOwnDroppedAfterIt() throws Exception {
    databases.clear();
    injected.clear();
    innerDatabases.clear();
    run(PaymentsTest.class).assertStatistics(s -> s.succeeded(4).failed(0));
    assertThat(innerDatabases).hasSize(1).doesNotContain(databases.get(0));
    assertThat(exists(innerDatabases.get(0))).isFalse();
    assertThat(databases).hasSize(2).allMatch(databases.get(0)::equals);
    assertThat(injected).hasSize(4);
    assertThat(injected.get(0)).isSameAs(injected.get(2)); // one Idem per class
    assertThat(injected.get(1)).isSameAs(injected.get(3)); // one pool per class
    assertThat(exists(databases.get(0))).as("the class's database dropped after it").isFalse();
  }

  @Test
  void migrateFalseLeavesTheDatabaseEmpty() throws Exception {
    databases.clear();
    run(WithoutMigrations.class).assertStatistics(s -> s.succeeded(1).failed(0));
    assertThat(exists(databases.get(0))).isFalse();
  }

  @Test
  void aPoolOfNoConnectionsIsRefusedNamingTheSetting() {
    Events events = EngineTestKit.engine("junit-jupiter").selectors(selectClass(BadPool.class)).execute().containerEvents();
    assertThat(events.failed().stream().map(e -> e.getPayload(org.junit.platform.engine.TestExecutionResult.class)
        .flatMap(org.junit.platform.engine.TestExecutionResult::getThrowable).map(Throwable::getMessage).orElse("")))
        .anyMatch(m -> m.contains("@IdemTest(poolSize = 0)"));
  }

  /**
   * The tests' events of {@code testClass}'s run, once its classes' own events (set-up and
   * teardown, where the extension does its work) are known to have no failure.
   */
  private static Events run(Class<?> testClass) {
    var results = EngineTestKit.engine("junit-jupiter").selectors(selectClass(testClass)).execute();
    results.containerEvents().assertStatistics(s -> s.failed(0));
    return results.testEvents();
  }

  private static boolean exists(String database) throws Exception {
    try (TestDatabase probe = TestDatabase.newDatabase("exists")) {
      if (probe.vendor() == TestDatabase.Vendor.MARIADB) {
        // MariaDB: asked of the server, from a database of its own
        return probe.count("SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", database) == 1;
      }
    }
    try (Connection c = DriverManager.getConnection(TestPostgres.server().adminUrl());
        PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM pg_database WHERE datname = ?")) {
      ps.setString(1, database);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getInt(1) == 1;
      }
    }
  }
}
