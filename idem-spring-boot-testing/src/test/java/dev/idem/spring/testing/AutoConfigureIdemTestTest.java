package dev.idem.spring.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.testing.TestDatabase;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.annotation.DirtiesContext;

/**
 * {@link AutoConfigureIdemTest} as a user meets it: the annotated classes below run through
 * JUnit's own engine with Spring's test support, and the database they were given is read from
 * outside afterwards.
 */
class AutoConfigureIdemTestTest {
  static final List<String> databases = new ArrayList<>();

  @SpringBootTest(classes = ShopApplication.class, webEnvironment = WebEnvironment.RANDOM_PORT)
  @AutoConfigureIdemTest
  @DirtiesContext // closed after the class, so the test below can see the database dropped
  static class ShopTest {
    @Autowired TestDatabase db;
    @Autowired DataSource dataSource;
    @LocalServerPort int port;

    @Test
    void theApplicationRunsOnTheTestsOwnMigratedDatabase() throws Exception {
      databases.add(db.name());
      assertThat(dataSource.unwrap(HikariDataSource.class).getJdbcUrl()).isEqualTo(db.jdbcUrl());
      try (java.sql.Connection c = dataSource.getConnection()) {
        assertThat(c.getMetaData().getDatabaseProductName()).as("the run's database").isEqualTo(db.vendor().toString());
      }
      HttpClient http = HttpClient.newHttpClient();
      for (int copy = 0; copy < 2; copy++) {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/orders"))
            .header("Content-Type", "application/json").header("X-Shop", "s1").header("Idempotency-Key", "k-1")
            .POST(HttpRequest.BodyPublishers.ofString("{\"order\":\"o-1\",\"amount\":5}")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(201);
      }
      assertThat(db.count("SELECT count(*) FROM orders WHERE order_id = 'o-1'")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys")).isEqualTo(1);
    }
  }

  @Test
  void aBootTestGetsADatabaseOfItsOwnDroppedWithTheContext() throws Exception {
    databases.clear();
    EngineTestKit.engine("junit-jupiter").selectors(selectClass(ShopTest.class)).execute()
        .testEvents().assertStatistics(s -> s.succeeded(1).failed(0));
    assertThat(databases).hasSize(1);
    // Asked of the server's catalog from another database on it.
    try (TestDatabase other = TestDatabase.newDatabase("dropped-check")) {
      String databasesNamed = other.vendor() == TestDatabase.Vendor.MARIADB
          ? "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?"
          : "SELECT count(*) FROM pg_database WHERE datname = ?";
      assertThat(other.count(databasesNamed, other.name())).as("the catalog query sees a database").isEqualTo(1);
      assertThat(other.count(databasesNamed, databases.get(0))).as("the database dropped when the context closed").isZero();
    }
  }
}
