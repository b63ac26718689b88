package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * The url-pattern guard ({@code idem.http.url-patterns=/*}, the explicit alternative to
 * {@code @Idempotent}), in a real Spring MVC application on a real Tomcat over loopback: the
 * controller's JdbcTemplate writes commit with the key in Spring's transaction, and the rows say
 * so; keys are per tenant ({@code idem.http.scope-header}); the actuator is never guarded.
 */
@IdemTest(sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
class IdemHttpAutoConfigurationTest {
  static TestDatabase db;
  static ConfigurableApplicationContext app;
  static URI base;
  static final HttpClient http = HttpClient.newHttpClient();

  /** One application for the class, on the class's database. */
  @BeforeAll
  static void start(TestDatabase database) {
    db = database;
    app = new SpringApplicationBuilder(App.class).properties(Map.of(
        "spring.datasource.url", db.jdbcUrl(), "spring.flyway.enabled", "false", "server.port", "0",
        "idem.http.url-patterns", "/*", "idem.http.methods", "GET,POST", "idem.http.scope-header", "X-Tenant",
        "management.endpoints.web.exposure.include", "health,idem")).run();
    base = URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
  }

  @AfterAll
  static void stop() {
    if (app != null) {
      app.close();
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Payments.class)
  static class App {}

  record Payment(String order, int amount) {}

  @RestController
  static class Payments {
    final JdbcTemplate jdbc;

    Payments(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @PostMapping("/payments")
    ResponseEntity<Map<String, Object>> pay(@RequestBody Payment p) {
      if (p.amount() <= 0) {
        return ResponseEntity.badRequest().body(Map.of("error", "amount must be positive"));
      }
      jdbc.update("INSERT INTO payments VALUES (?, ?)", p.order(), p.amount());
      if (p.order().startsWith("boom")) {
        throw new IllegalStateException("failed after the insert");
      }
      if (p.amount() > 10_000) {
        return ResponseEntity.status(HttpStatus.PAYMENT_REQUIRED).body(Map.of("declined", p.order()));
      }
      return ResponseEntity.created(URI.create("/payments/" + p.order())).body(Map.of("id", "pay_" + p.order()));
    }
  }

  static HttpResponse<String> post(String key, String tenant, String json) throws Exception {
    HttpRequest.Builder r = HttpRequest.newBuilder(base.resolve("/payments")).header("Content-Type", "application/json")
        .header("X-Tenant", tenant).POST(HttpRequest.BodyPublishers.ofString(json));
    if (key != null) {
      r.header("Idempotency-Key", key);
    }
    return http.send(r.build(), HttpResponse.BodyHandlers.ofString());
  }

  static long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  static long keys(String tenant, String key) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?", tenant, key);
  }

  @Test
  void aRepeatGetsTheFirstResponseAndThePaymentIsWrittenOnce() throws Exception {
    HttpResponse<String> first = post("\"k-1\"", "a", "{\"order\":\"o1\",\"amount\":4000}");
    HttpResponse<String> again = post("\"k-1\"", "a", "{ \"amount\": 4000, \"order\": \"o1\" }");
    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(again.statusCode()).isEqualTo(201);
    assertThat(again.body()).isEqualTo(first.body()).contains("pay_o1");
    assertThat(again.headers().firstValue("Location")).isEqualTo(first.headers().firstValue("Location")).isPresent();
    assertThat(again.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(payments("o1")).isEqualTo(1);
    assertThat(keys("a", "k-1")).isEqualTo(1);
    // both tell the client until when the key is remembered: the key row's expires_at (read in
    // Spring's transaction for the first, computed for the replay), rounded down to the second
    long rowExpiry = db.count(db.vendor() == dev.idem.testing.TestDatabase.Vendor.MARIADB
        ? "SELECT timestampdiff(second, '1970-01-01 00:00:00', expires_at) FROM idem_keys WHERE scope = 'a' AND idem_keys.key = 'k-1'"
        : "SELECT floor(date_part('epoch', expires_at))::bigint FROM idem_keys WHERE scope = 'a' AND key = 'k-1'");
    for (HttpResponse<String> r : List.of(first, again)) {
      String expires = r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENCY_KEY_EXPIRES).orElseThrow();
      assertThat(java.time.format.DateTimeFormatter.RFC_1123_DATE_TIME.parse(expires, java.time.Instant::from).getEpochSecond())
          .isEqualTo(rowExpiry);
    }

    HttpResponse<String> reused = post("\"k-1\"", "a", "{\"order\":\"o1\",\"amount\":5000}");
    assertThat(reused.statusCode()).isEqualTo(422);
    assertThat(reused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
    assertThat(reused.body()).contains("\"type\":\"https://idem.dev/problems/idempotency-key-reused\"");

    // the same key value from another tenant is another key
    assertThat(post("\"k-1\"", "b", "{\"order\":\"o1b\",\"amount\":4000}").statusCode()).isEqualTo(201);
    assertThat(payments("o1b")).isEqualTo(1);
    assertThat(keys("b", "k-1")).isEqualTo(1);
  }

  @Test
  void aDeclineIsStoredAndReplayedAValidationFailureAndAnExceptionLeaveNothing() throws Exception {
    HttpResponse<String> declined = post("k-402", "a", "{\"order\":\"o402\",\"amount\":20000}");
    HttpResponse<String> replayed = post("k-402", "a", "{\"order\":\"o402\",\"amount\":20000}");
    assertThat(declined.statusCode()).isEqualTo(402);
    assertThat(replayed.statusCode()).isEqualTo(402);
    assertThat(replayed.body()).isEqualTo(declined.body());
    assertThat(replayed.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(keys("a", "k-402")).isEqualTo(1);

    assertThat(post("k-400", "a", "{\"order\":\"o400\",\"amount\":-1}").statusCode()).isEqualTo(400);
    assertThat(keys("a", "k-400")).isZero();

    // the insert ran, then the controller threw: Spring's transaction rolls both the row and the key back
    assertThat(post("k-boom", "a", "{\"order\":\"boom1\",\"amount\":100}").statusCode()).isEqualTo(500);
    assertThat(payments("boom1")).isZero();
    assertThat(keys("a", "k-boom")).isZero();

    HttpResponse<String> missing = post(null, "a", "{\"order\":\"o-nokey\",\"amount\":100}");
    assertThat(missing.statusCode()).isEqualTo(400);
    assertThat(missing.body()).contains("Idempotency-Key");
    assertThat(payments("o-nokey")).isZero();
  }

  @Test
  void theActuatorAndTheErrorPathAreNeverGuardedEvenUnderSlashStar() throws Exception {
    HttpResponse<String> health = http.send(HttpRequest.newBuilder(base.resolve("/actuator/health")).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    HttpResponse<String> error = http.send(HttpRequest.newBuilder(base.resolve("/error")).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    HttpResponse<String> redrive = http.send(HttpRequest.newBuilder(base.resolve("/actuator/idem/redriveAll"))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{}")).build(),
        HttpResponse.BodyHandlers.ofString());
    // A guarded route without a key would be 400 "Idempotency-Key is missing"
    assertThat(health.statusCode()).isEqualTo(200);
    assertThat(redrive.body()).doesNotContain("Idempotency-Key");
    assertThat(redrive.statusCode()).isEqualTo(200);
    assertThat(error.body()).doesNotContain("Idempotency-Key");

    HttpResponse<String> noTenant = http.send(HttpRequest.newBuilder(base.resolve("/payments"))
        .header("Content-Type", "application/json").header("Idempotency-Key", "k-no-tenant")
        .POST(HttpRequest.BodyPublishers.ofString("{\"order\":\"o-no-tenant\",\"amount\":100}")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(noTenant.statusCode()).isEqualTo(400);
    assertThat(noTenant.body()).contains("X-Tenant is missing");
    assertThat(payments("o-no-tenant")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-no-tenant'")).isZero();
  }
}
