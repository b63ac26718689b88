package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.StorePolicy;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServletRequest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.CrossOrigin;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.HandlerMapping;
import org.springframework.web.util.ServletRequestPathUtils;
import org.springframework.web.util.UrlPathHelper;

/**
 * {@code @Idempotent} on Spring MVC handlers, in a real application on a real Tomcat over loopback,
 * with a real HikariCP pool of 10 and the run's database: only annotated routes are guarded, keys
 * are per tenant ({@code idem.http.scope-header}), copies of a running request wait holding no pool
 * connection, another body is refused at once and counted as a mismatch. Every test reads the rows.
 */
@IdemTest
class IdemHttpGuardsTest {
  static TestDatabase db;
  static ConfigurableApplicationContext app;
  static URI base;
  static final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /** Handlers held by the test: a latch per order, and one counted down when the handler holds. */
  static final Map<String, CountDownLatch> gates = new ConcurrentHashMap<>();
  static final Map<String, CountDownLatch> entered = new ConcurrentHashMap<>();
  /** Runs of the handler per order. */
  static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
  static final RecordingListener recorded = new RecordingListener();
  /** Per X-Probe value: the handler-mapping attributes a filter mapped after the guard saw on the request. */
  static final Map<String, List<String>> probes = new ConcurrentHashMap<>();

  /** One application for the class, on the class's database. */
  @BeforeAll
  static void start(TestDatabase database) {
    db = database;
    db.execute("CREATE TABLE effects (" + Vendors.autoId(db) + ", order_id text NOT NULL, amount int NOT NULL)");
    app = new SpringApplicationBuilder(App.class).properties(Map.of(
        "spring.datasource.url", db.jdbcUrl(), "spring.datasource.hikari.maximum-pool-size", "10",
        "spring.flyway.enabled", "false", "server.port", "0",
        "idem.http.scope-header", "X-Tenant-Id", "idem.http.in-flight-wait", "20s",
        "test.cancel-window", "90s", "management.endpoints.web.exposure.include", "idem")).run();
    base = URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
  }

  @AfterAll
  static void stop() {
    gates.values().forEach(CountDownLatch::countDown);
    if (app != null) {
      app.close();
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Orders.class)
  static class App {
    /** Counts what idem reports: the executor's events and the filter's own. */
    @Bean
    IdemListener recording() {
      return recorded;
    }

    /** The application's own store policy: a 409 "sold out" is a decision, stored. */
    @Bean
    IdempotencyKeyFilterCustomizer soldOutIsStored() {
      return b -> b.storePolicy(StorePolicy.DEFAULT.alsoStoring(409));
    }

    /**
     * A filter mapped after the guard (no order of its own): records the attributes of Spring MVC's
     * handler lookup that it finds on a request carrying X-Probe. It should find none.
     */
    @Bean
    FilterRegistrationBean<Filter> probe() {
      FilterRegistrationBean<Filter> r = new FilterRegistrationBean<>((req, res, chain) -> {
        String probe = ((HttpServletRequest) req).getHeader("X-Probe");
        if (probe != null) {
          probes.put(probe, Collections.list(req.getAttributeNames()).stream()
              .filter(n -> n.startsWith(HandlerMapping.class.getName()) || n.equals(UrlPathHelper.PATH_ATTRIBUTE)
                  || n.equals(ServletRequestPathUtils.PATH_ATTRIBUTE))
              .toList());
        }
        chain.doFilter(req, res);
      });
      r.setOrder(Ordered.LOWEST_PRECEDENCE);
      return r;
    }
  }

  /** Boxed flags: a body may leave them out (Boot 4's Jackson 3 refuses a missing primitive). */
  record Order(String order, int amount, Boolean hold, Boolean failFirst) {
    boolean held() {
      return Boolean.TRUE.equals(hold);
    }

    boolean failsFirst() {
      return Boolean.TRUE.equals(failFirst);
    }
  }

  @RestController
  @CrossOrigin(origins = "https://shop.example")
  static class Orders {
    final JdbcTemplate jdbc;

    Orders(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent
    @PostMapping("/orders")
    ResponseEntity<Map<String, Object>> place(@RequestBody Order o) throws InterruptedException {
      int run = runs.computeIfAbsent(o.order(), k -> new AtomicInteger()).incrementAndGet();
      long id = jdbc.queryForObject("INSERT INTO effects (order_id, amount) VALUES (?, ?) RETURNING id", Long.class,
          o.order(), o.amount());
      if (o.held() && (run == 1 || !o.failsFirst())) {
        entered.get(o.order()).countDown();
        if (!gates.get(o.order()).await(30, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never opened the gate of " + o.order());
        }
      }
      if (o.failsFirst() && run == 1) {
        throw new IllegalStateException("test: the first run fails after its insert");
      }
      return ResponseEntity.status(HttpStatus.CREATED).body(Map.of("id", "ord_" + id, "order", o.order()));
    }

    /** Its own settings: a window from a placeholder, and a 404 stored (the default policy does not). */
    @Idempotent(window = "${test.cancel-window}", storedStatuses = 404)
    @PostMapping("/orders/{order}/cancel")
    ResponseEntity<Map<String, Object>> cancel(@PathVariable String order) {
      jdbc.update("INSERT INTO effects (order_id, amount) VALUES (?, 0)", order + "-cancel");
      return ResponseEntity.status(HttpStatus.NOT_FOUND).body(Map.of("error", "no order " + order));
    }

    /** Sold out: a 409 the application's customizer stores (the annotation sets no stored statuses). */
    @Idempotent
    @PostMapping("/orders/{order}/reserve")
    ResponseEntity<Map<String, Object>> reserve(@PathVariable String order) {
      jdbc.update("INSERT INTO effects (order_id, amount) VALUES (?, 0)", order + "-reserve");
      return ResponseEntity.status(HttpStatus.CONFLICT).body(Map.of("error", "sold out"));
    }

    /** Not annotated: a provider's webhook, say. Never guarded. */
    @PostMapping("/webhook")
    Map<String, Object> webhook(@RequestBody Order o) {
      jdbc.update("INSERT INTO effects (order_id, amount) VALUES (?, ?)", o.order(), o.amount());
      return Map.of("ok", true);
    }
  }

  static HttpResponse<String> post(String path, String key, String tenant, String json) {
    HttpRequest.Builder r = HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(json));
    if (key != null) {
      r.header("Idempotency-Key", key);
    }
    if (tenant != null) {
      r.header("X-Tenant-Id", tenant);
    }
    try {
      return http.send(r.build(), HttpResponse.BodyHandlers.ofString());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static String order(String order, int amount, boolean hold) {
    return "{\"order\":\"" + order + "\",\"amount\":" + amount + ",\"hold\":" + hold + "}";
  }

  static HttpResponse<String> send(HttpRequest.Builder request) {
    try {
      return http.send(request.timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static long effects(String order) {
    return db.count("SELECT count(*) FROM effects WHERE order_id = ?", order);
  }

  static long keyRows(String key) {
    return db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key);
  }

  static CountDownLatch gate(String order) {
    entered.put(order, new CountDownLatch(1));
    CountDownLatch gate = new CountDownLatch(1);
    gates.put(order, gate);
    return gate;
  }

  /** Request threads parked in the filter's in-memory wait for a running copy. */
  static long waitingInMemory() {
    return Poll.threadsWaitingIn("dev.idem.http.InFlightRequests", "admit");
  }

  @Test
  void unannotatedRoutesPassWithoutAKey() {
    HttpResponse<String> webhook = post("/webhook", null, null, order("wh-1", 5, false));

    assertThat(webhook.statusCode()).isEqualTo(200);
    assertThat(effects("wh-1")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys")).isEqualTo(keyRowsOfOtherTests());
  }

  /**
   * Requests Spring MVC answers without a handler method (404, 405, a CORS pre-flight) pass the
   * guard untouched, even with a key: nothing is claimed.
   */
  @Test
  void requestsWithNoHandlerMethodPass() {
    HttpResponse<String> getNothing = send(HttpRequest.newBuilder(base.resolve("/nope")).GET()
        .header("Idempotency-Key", "k-nohandler").header("X-Tenant-Id", "tenant-a"));
    HttpResponse<String> postNothing = post("/nope", "k-nohandler", "tenant-a", order("o-nohandler", 5, false));
    HttpResponse<String> put = send(HttpRequest.newBuilder(base.resolve("/orders"))
        .PUT(HttpRequest.BodyPublishers.ofString(order("o-nohandler", 5, false))).header("Content-Type", "application/json")
        .header("Idempotency-Key", "k-nohandler").header("X-Tenant-Id", "tenant-a"));
    HttpResponse<String> preflight = send(HttpRequest.newBuilder(base.resolve("/orders"))
        .method("OPTIONS", HttpRequest.BodyPublishers.noBody()).header("Origin", "https://shop.example")
        .header("Access-Control-Request-Method", "POST").header("Access-Control-Request-Headers", "idempotency-key"));

    assertThat(getNothing.statusCode()).isEqualTo(404);
    assertThat(postNothing.statusCode()).isEqualTo(404);
    assertThat(put.statusCode()).isEqualTo(405);
    assertThat(preflight.statusCode()).isEqualTo(200);
    assertThat(preflight.headers().firstValue("Access-Control-Allow-Origin")).hasValue("https://shop.example");
    assertThat(runs.get("o-nohandler")).isNull();
    assertThat(effects("o-nohandler")).isZero();
    assertThat(keyRows("k-nohandler")).isZero();
  }

  /** The guard's handler lookup leaves nothing on the request for the filters and handler after it. */
  @Test
  void theHandlerLookupLeavesNoAttributesBehind() {
    HttpResponse<String> guarded = send(HttpRequest.newBuilder(base.resolve("/orders/o-probe/cancel"))
        .POST(HttpRequest.BodyPublishers.noBody()).header("Idempotency-Key", "k-probe").header("X-Tenant-Id", "tenant-a")
        .header("X-Probe", "guarded"));
    HttpResponse<String> passed = send(HttpRequest.newBuilder(base.resolve("/webhook"))
        .POST(HttpRequest.BodyPublishers.ofString(order("wh-probe", 5, false))).header("Content-Type", "application/json")
        .header("X-Probe", "passed"));

    assertThat(guarded.statusCode()).isEqualTo(404); // the cancel handler's stored 404
    assertThat(passed.statusCode()).isEqualTo(200);
    assertThat(probes.get("guarded")).isEmpty();
    assertThat(probes.get("passed")).isEmpty();
    assertThat(keyRows("k-probe")).isEqualTo(1);
    assertThat(effects("o-probe-cancel")).isEqualTo(1);
    assertThat(effects("wh-probe")).isEqualTo(1);
  }

  /** An annotation without storedStatuses keeps the customizer's store policy. */
  @Test
  void anAnnotationWithoutStoredStatusesKeepsTheCustomizersPolicy() {
    HttpResponse<String> first = post("/orders/o-soldout/reserve", "k-soldout", "tenant-a", "");
    HttpResponse<String> again = post("/orders/o-soldout/reserve", "k-soldout", "tenant-a", "");

    assertThat(first.statusCode()).isEqualTo(409);
    assertThat(again.statusCode()).isEqualTo(409);
    assertThat(again.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(effects("o-soldout-reserve")).isEqualTo(1);
    assertThat(keyRows("k-soldout")).isEqualTo(1);
  }

  /**
   * The first copy fails (an exception after its insert) while 5 copies wait on it: its insert
   * rolls back, one copy runs again and commits, the 4 others get its replay.
   */
  @Test
  void whenTheFirstCopyFailsOneWaitingCopyRunsAndTheOthersGetItsReplay() throws Exception {
    String order = "o-failfirst";
    String key = "k-failfirst";
    String body = "{\"order\":\"" + order + "\",\"amount\":3,\"hold\":true,\"failFirst\":true}";
    CountDownLatch gate = gate(order);
    CompletableFuture<HttpResponse<String>> leader = CompletableFuture.supplyAsync(() -> post("/orders", key, "tenant-a", body));
    assertThat(entered.get(order).await(20, TimeUnit.SECONDS)).isTrue();
    long parked = waitingInMemory();
    ExecutorService senders = Executors.newFixedThreadPool(5);
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      copies.add(CompletableFuture.supplyAsync(() -> post("/orders", key, "tenant-a", body), senders));
    }
    senders.shutdown();
    Poll.until("5 copies wait in memory", () -> waitingInMemory() - parked == 5);

    gate.countDown();
    assertThat(leader.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(500);
    List<HttpResponse<String>> answers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> c : copies) {
      answers.add(c.get(30, TimeUnit.SECONDS));
    }
    assertThat(answers).allSatisfy(r -> assertThat(r.statusCode()).isEqualTo(201));
    assertThat(answers).extracting(HttpResponse::body).containsOnly(answers.get(0).body());
    assertThat(answers).filteredOn(r -> r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED).isPresent())
        .hasSize(4);
    assertThat(runs.get(order)).hasValue(2);
    assertThat(effects(order)).isEqualTo(1);
    assertThat(keyRows(key)).isEqualTo(1);
  }

  /** Key rows the other tests of this class may have made meanwhile (none are made by the above). */
  private static long keyRowsOfOtherTests() {
    return db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key LIKE 'k-%'");
  }

  @Test
  void anAnnotatedRouteIsGuardedAndOneKeyFromTwoTenantsIsTwoKeys() {
    HttpResponse<String> missing = post("/orders", null, "tenant-a", order("o-nokey", 5, false));
    HttpResponse<String> noTenant = post("/orders", "k-tenants", null, order("o-tenants", 5, false));
    HttpResponse<String> a = post("/orders", "k-tenants", "tenant-a", order("o-tenants", 5, false));
    HttpResponse<String> b = post("/orders", "k-tenants", "tenant-b", order("o-tenants", 5, false));
    HttpResponse<String> aAgain = post("/orders", "k-tenants", "tenant-a", order("o-tenants", 5, false));
    HttpResponse<String> bAgain = post("/orders", "k-tenants", "tenant-b", order("o-tenants", 5, false));

    assertThat(missing.statusCode()).isEqualTo(400);
    assertThat(effects("o-nokey")).isZero();
    assertThat(noTenant.statusCode()).isEqualTo(400);
    assertThat(noTenant.body()).contains("X-Tenant-Id is missing");
    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(b.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).isEmpty();
    assertThat(b.body()).isNotEqualTo(a.body()); // its own order id: nothing of tenant a's response
    assertThat(aAgain.body()).isEqualTo(a.body());
    assertThat(bAgain.body()).isEqualTo(b.body());
    assertThat(runs.get("o-tenants")).hasValue(2);
    assertThat(effects("o-tenants")).isEqualTo(2);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-tenants' AND scope IN ('tenant-a', 'tenant-b')"))
        .isEqualTo(2);
    assertThat(keyRows("k-tenants")).isEqualTo(2);
  }

  @Test
  void aHandlersAnnotationSetsItsWindowAndStoredStatuses() {
    HttpResponse<String> first = post("/orders/o-missing/cancel", "k-cancel", "tenant-a", "");
    HttpResponse<String> again = post("/orders/o-missing/cancel", "k-cancel", "tenant-a", "");

    assertThat(first.statusCode()).isEqualTo(404);
    assertThat(again.statusCode()).isEqualTo(404);
    assertThat(again.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(effects("o-missing-cancel")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-cancel'"
        + " AND " + Vendors.windowIs(db, Duration.ofSeconds(90)))).isEqualTo(1);
  }

  /**
   * 20 copies of one request whose handler is held: while 19 wait (seen parked in the filter's
   * in-memory wait), the pool lends at most one connection among them, the leader's. Another body
   * under the key is refused while the leader is still held, at once, and counted as a mismatch.
   * After the release every copy gets the same response, and there is one effect and one key.
   */
  @Test
  void copiesOfAHeldRequestWaitHoldingNoConnectionAndAnotherBodyIs422AtOnce() throws Exception {
    HikariDataSource pool = (HikariDataSource) app.getBean(DataSource.class);
    String order = "o-storm";
    String key = "k-storm";
    CountDownLatch gate = gate(order);
    CompletableFuture<HttpResponse<String>> leader =
        CompletableFuture.supplyAsync(() -> post("/orders", key, "tenant-a", order(order, 40, true)));
    assertThat(entered.get(order).await(20, TimeUnit.SECONDS)).isTrue();
    long parked = waitingInMemory();
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    ExecutorService senders = Executors.newFixedThreadPool(19);
    for (int i = 0; i < 19; i++) {
      copies.add(CompletableFuture.supplyAsync(() -> post("/orders", key, "tenant-a", order(order, 40, true)), senders));
    }
    senders.shutdown();
    Poll.until("19 copies wait in memory", () -> waitingInMemory() - parked == 19);
    int active = pool.getHikariPoolMXBean().getActiveConnections();
    assertThat(active).as("pool connections in use while 19 copies wait").isLessThanOrEqualTo(1);

    long events0 = mismatches(key);
    List<Long> millis = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      long sent = System.nanoTime();
      HttpResponse<String> other = post("/orders", key, "tenant-a", order(order, 9900, true));
      millis.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent));
      assertThat(other.statusCode()).isEqualTo(422);
      assertThat(other.body()).contains("already used");
    }
    assertThat(leader).as("the leader is still held").isNotDone();
    assertThat(waitingInMemory() - parked).isEqualTo(19);
    // At once: answered while the leader is still held, and far below the 20 s in-flight wait on
    // every try. How fast is a figure for a benchmark, not this test (seen: 112 ms at best on a
    // two-core machine under a load of 37).
    assertThat(millis).as("ms per try").allSatisfy(ms -> assertThat(ms).isLessThan(2_000));
    assertThat(mismatches(key) - events0).isEqualTo(5);
    assertThat(effects(order)).isZero(); // nothing committed yet: the leader is held

    gate.countDown();
    HttpResponse<String> first = leader.get(30, TimeUnit.SECONDS);
    assertThat(first.statusCode()).isEqualTo(201);
    for (CompletableFuture<HttpResponse<String>> c : copies) {
      HttpResponse<String> r = c.get(30, TimeUnit.SECONDS);
      assertThat(r.statusCode()).isEqualTo(201);
      assertThat(r.body()).isEqualTo(first.body());
      assertThat(r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    }
    assertThat(runs.get(order)).hasValue(1);
    assertThat(effects(order)).isEqualTo(1);
    assertThat(keyRows(key)).isEqualTo(1);
    assertThat(recorded.all()).noneMatch(e -> e instanceof IdemEvent.InFlight f && f.key().value().equals(key));
  }

  private static long mismatches(String key) {
    return recorded.all().stream()
        .filter(e -> e instanceof IdemEvent.FingerprintMismatch m && m.key().value().equals(key) && m.source().equals("http"))
        .count();
  }
}
