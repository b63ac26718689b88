package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.http.LongOperations;
import dev.idem.key.IdempotencyKey;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * Long operations under the starter ({@code idem.http.long-operations.status-path}), in a real
 * Spring MVC application over loopback: an {@code @Idempotent} handler accepts with the {@code
 * LongOperations} bean and writes its job row in Spring's transaction, with the key; a worker in a
 * Spring transaction makes the export and records the final response; the guard answers the status
 * resource, to its caller only. Read back from the database.
 */
@IdemTest(sql = {"CREATE TABLE export_jobs (scope text NOT NULL, op text NOT NULL, report text NOT NULL)",
    "CREATE TABLE exports (report text NOT NULL)"})
class IdemLongOperationsTest {
  static TestDatabase db;
  static ConfigurableApplicationContext app;
  static URI base;
  static final HttpClient http = HttpClient.newHttpClient();

  @BeforeAll
  static void start(TestDatabase database) {
    db = database;
    app = new SpringApplicationBuilder(App.class).properties(Map.of(
        "spring.datasource.url", db.jdbcUrl(), "spring.flyway.enabled", "false", "server.port", "0",
        "idem.http.scope-header", "X-Tenant", "idem.http.long-operations.status-path", "/operations/")).run();
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
  @Import(Exports.class)
  static class App {}

  record Export(String report) {}

  @RestController
  static class Exports {
    final JdbcTemplate jdbc;
    final LongOperations operations;

    Exports(JdbcTemplate jdbc, LongOperations operations) {
      this.jdbc = jdbc;
      this.operations = operations;
    }

    @Idempotent
    @PostMapping("/exports")
    Map<String, Object> export(@RequestBody Export export, HttpServletRequest request, HttpServletResponse response) {
      IdempotencyKey operation = operations.accept(request, response);
      // the work's durable start, in Spring's transaction with the key and the 202
      jdbc.update("INSERT INTO export_jobs VALUES (?, ?, ?)", operation.scope(), operation.value(), export.report());
      return Map.of("status", "accepted");
    }
  }

  static HttpResponse<String> send(HttpRequest.Builder request, String tenant) throws Exception {
    return http.send(request.setHeader("X-Tenant", tenant).build(), HttpResponse.BodyHandlers.ofString());
  }

  /** The worker: every job, its export and its final response in one Spring transaction. */
  static void work() {
    JdbcTemplate jdbc = app.getBean(JdbcTemplate.class);
    LongOperations operations = app.getBean(LongOperations.class);
    new TransactionTemplate(app.getBean(PlatformTransactionManager.class)).executeWithoutResult(s -> {
      for (Map<String, Object> job : jdbc.queryForList("SELECT scope, op, report FROM export_jobs")) {
        jdbc.update("INSERT INTO exports VALUES (?)", job.get("report"));
        operations.complete(IdempotencyKey.of((String) job.get("scope"), (String) job.get("op")), 200,
            Map.of("Content-Type", "application/json"), ("{\"report\":\"" + job.get("report") + "\"}").getBytes(StandardCharsets.UTF_8));
        jdbc.update("DELETE FROM export_jobs WHERE scope = ? AND op = ?", job.get("scope"), job.get("op"));
      }
    });
  }

  @Test
  void anAcceptedExportIsAnsweredByItsStatusResourceToItsCallerOnly() throws Exception {
    HttpRequest.Builder post = HttpRequest.newBuilder(base.resolve("/exports")).header("Content-Type", "application/json")
        .header("Idempotency-Key", "e-1").POST(HttpRequest.BodyPublishers.ofString("{\"report\":\"q3\"}"));
    HttpResponse<String> accepted = send(post, "a");
    HttpResponse<String> again = send(post, "a");

    assertThat(accepted.statusCode()).as(accepted.body()).isEqualTo(202);
    assertThat(accepted.headers().firstValue("Location")).hasValue("/operations/e-1");
    assertThat(again.statusCode()).isEqualTo(202);
    assertThat(again.body()).isEqualTo(accepted.body());
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(db.count("SELECT count(*) FROM export_jobs WHERE op = 'e-1'")).isEqualTo(1);

    HttpRequest.Builder status = HttpRequest.newBuilder(base.resolve("/operations/e-1")).GET();
    assertThat(send(status, "a").statusCode()).isEqualTo(202);
    work();
    HttpResponse<String> done = send(HttpRequest.newBuilder(base.resolve("/operations/e-1")).header("Prefer", "wait=5").GET(), "a");
    HttpResponse<String> other = send(status, "b");

    assertThat(done.statusCode()).isEqualTo(200);
    assertThat(done.body()).isEqualTo("{\"report\":\"q3\"}");
    assertThat(other.statusCode()).isEqualTo(404);
    assertThat(other.body()).doesNotContain("q3");
    assertThat(db.count("SELECT count(*) FROM exports WHERE report = 'q3'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'a' AND idem_keys.key = 'e-1'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'b'")).isZero();
  }

  /** idem-http's jar carries the browser client as a static resource, which Boot serves as is. */
  @Test
  void theBrowserClientIsServedFromIdemHttpsJar() throws Exception {
    HttpResponse<String> js = send(HttpRequest.newBuilder(base.resolve("/idem/idem-client.js")).GET(), "a");

    assertThat(js.statusCode()).isEqualTo(200);
    assertThat(js.headers().firstValue("Content-Type")).hasValueSatisfying(t -> assertThat(t).contains("javascript"));
    assertThat(js.body()).contains("localStorage").contains("Idempotency-Key");
  }
}
