package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.ScopeResolver;
import dev.idem.jdbc.Idem;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * The starter unchanged on a MariaDB DataSource: two instances of an application whose one setting
 * is its {@code spring.datasource.url} (and a free port), on one empty MariaDB database, serving
 * real HTTP on loopback. Boot's Flyway runs the application's own migration, the starter runs
 * idem's beside it in the same database (no {@code idem.schema}: on MariaDB the DataSource's own
 * database), and {@code @Idempotent} guards the route. Every test reads the database: one charge
 * and one key row per key, whichever instance the copies reach.
 */
@IdemTest(migrate = false, vendors = TestDatabase.Vendor.MARIADB,
    vendorsReason = "the starter on a MariaDB DataSource; on PostgreSQL every other test of the starter is this one's counterpart")
class IdemOnMariaDbTest {
  static TestDatabase db;
  static final List<ConfigurableApplicationContext> apps = new ArrayList<>();
  static URI a;
  static URI b;
  static final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  /** The held first run of {@link #aCopyMeetsTheRunningOneOnEitherInstanceAndEveryRepeatGetsItsAnswer}: entered, released. */
  static final CountDownLatch entered = new CountDownLatch(1);
  static final CountDownLatch release = new CountDownLatch(1);

  @BeforeAll
  static void start(TestDatabase database) {
    db = database;
    a = startInstance();
    b = startInstance();
  }

  /** An instance of the application: nothing set for idem, nothing for MariaDB. */
  static URI startInstance() {
    ConfigurableApplicationContext app = new SpringApplicationBuilder(App.class)
        .properties(Map.of("spring.datasource.url", db.jdbcUrl(), "server.port", "0")).run();
    apps.add(app);
    return URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port") + "/charges");
  }

  @AfterAll
  static void stop() {
    release.countDown();
    apps.forEach(ConfigurableApplicationContext::close);
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Charges.class)
  static class App {
    /** Whose key it is: the account the caller names (the application's own code, not a setting). */
    @Bean
    ScopeResolver accounts() {
      return request -> request.getHeader("X-Account");
    }
  }

  /** Boxed: a body may leave it out. */
  record Charge(String order, int amount, Boolean hold) {}

  @RestController
  static class Charges {
    final JdbcTemplate jdbc;

    Charges(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent
    @PostMapping("/charges")
    ResponseEntity<Map<String, Object>> charge(@RequestBody Charge charge) throws InterruptedException {
      jdbc.update("INSERT INTO charges (order_id, amount) VALUES (?, ?)", charge.order(), charge.amount());
      if (Boolean.TRUE.equals(charge.hold())) {
        entered.countDown();
        assertThat(release.await(30, TimeUnit.SECONDS)).as("released by the test").isTrue();
      }
      return ResponseEntity.status(201).body(Map.of("order", charge.order(), "charge", "ch_" + System.nanoTime()));
    }
  }

  static HttpResponse<String> post(URI uri, String key, String body) {
    try {
      return http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
          .header("Content-Type", "application/json").header("X-Account", "acct-1")
          .header(IdempotencyKeyFilter.IDEMPOTENCY_KEY, key).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
          HttpResponse.BodyHandlers.ofString());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static String body(String order, int amount, boolean hold) {
    return "{\"order\":\"" + order + "\",\"amount\":" + amount + (hold ? ",\"hold\":true" : "") + "}";
  }

  static long charges(String order) {
    return db.count("SELECT count(*) FROM charges WHERE order_id = ?", order);
  }

  static long keyRows(String key) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = 'acct-1' AND idem_keys.key = ?", key);
  }

  static boolean replayed(HttpResponse<String> r) {
    return r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED).orElse("").equals("true");
  }

  @Test
  void bothMigrationsRanInTheApplicationsOwnDatabaseEachWithItsHistory() {
    assertThat(db.count("SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name IN"
        + " ('idem_keys', 'idem_inbox', 'idem_outbox', 'idem_schema_history', 'charges', 'flyway_schema_history')", db.name()))
        .isEqualTo(6);
    assertThat(db.count("SELECT count(*) FROM flyway_schema_history WHERE success AND script = 'V1__charges.sql'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM flyway_schema_history WHERE script LIKE '%idem%'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_schema_history WHERE success AND script = 'V1__idem.sql'")).isEqualTo(1);
    try (var conn = apps.get(0).getBean(javax.sql.DataSource.class).getConnection()) {
      assertThat(conn.getMetaData().getDatabaseProductName()).isEqualTo("MariaDB");
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
    assertThat(apps.get(0).getBean(Idem.class)).isNotNull();
  }

  /**
   * The first run is held inside its transaction: a copy on the same instance waits in memory, a
   * copy on the other reaches MariaDB and meets the uncommitted key; both are answered 409 (in
   * flight) after the filter's wait, with nothing written. Released, the first commits its charge
   * with its key, and every repeat, on either instance, gets its answer without running again.
   */
  @Test
  void aCopyMeetsTheRunningOneOnEitherInstanceAndEveryRepeatGetsItsAnswer() throws Exception {
    String held = body("o-held", 500, true);
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> post(a, "k-held", held));
    assertThat(entered.await(30, TimeUnit.SECONDS)).as("the first run holds").isTrue();

    HttpResponse<String> sameInstance = post(a, "k-held", held);
    HttpResponse<String> otherInstance = post(b, "k-held", held);
    for (HttpResponse<String> copy : List.of(sameInstance, otherInstance)) {
      assertThat(copy.statusCode()).as(copy.uri() + ": in flight").isEqualTo(409);
      assertThat(copy.headers().firstValue("Retry-After")).isPresent();
    }
    // seen from outside: neither the charge nor the key is committed while the first runs
    assertThat(List.of(charges("o-held"), keyRows("k-held"))).containsExactly(0L, 0L);

    release.countDown();
    HttpResponse<String> done = first.get(30, TimeUnit.SECONDS);
    assertThat(done.statusCode()).isEqualTo(201);
    assertThat(replayed(done)).isFalse();
    for (URI instance : List.of(a, b, a, b)) {
      HttpResponse<String> again = post(instance, "k-held", held);
      assertThat(again.statusCode()).isEqualTo(201);
      assertThat(replayed(again)).isTrue();
      assertThat(again.body()).isEqualTo(done.body());
    }
    assertThat(List.of(charges("o-held"), keyRows("k-held"))).containsExactly(1L, 1L);
  }

  /** Copies of many keys at once, each key sent to both instances: one charge and one key row per key. */
  @Test
  void racingCopiesOfManyKeysOnBothInstancesChargeOncePerKey() throws Exception {
    int keys = 20;
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < keys; i++) {
      String key = "k-race-" + i;
      String body = body("o-race-" + i, 100 + i, false);
      for (URI instance : List.of(a, b)) {
        copies.add(CompletableFuture.supplyAsync(() -> post(instance, key, body)));
      }
    }
    for (CompletableFuture<HttpResponse<String>> copy : copies) {
      // the first, its replay, or 409 while the first still ran: never a second run, never an error
      assertThat(copy.get(60, TimeUnit.SECONDS).statusCode()).isIn(201, 409);
    }
    for (int i = 0; i < keys; i++) {
      String key = "k-race-" + i;
      assertThat(List.of(charges("o-race-" + i), keyRows(key))).as(key).containsExactly(1L, 1L);
      HttpResponse<String> again = post(i % 2 == 0 ? a : b, key, body("o-race-" + i, 100 + i, false));
      assertThat(replayed(again)).as(key).isTrue();
    }
    assertThat(db.count("SELECT count(*) FROM charges WHERE order_id LIKE 'o-race-%'")).isEqualTo(keys);
  }

  /** Another request under a key already used: 422 on either instance, nothing run. */
  @Test
  void anotherBodyUnderAUsedKeyIsRefusedOnEitherInstance() {
    assertThat(post(a, "k-reuse", body("o-reuse", 700, false)).statusCode()).isEqualTo(201);
    for (URI instance : List.of(a, b)) {
      assertThat(post(instance, "k-reuse", body("o-reuse", 999, false)).statusCode()).isEqualTo(422);
    }
    assertThat(keyRows("k-reuse")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM charges WHERE order_id = 'o-reuse' AND amount = 999")).isZero();
    assertThat(charges("o-reuse")).isEqualTo(1);
  }
}
