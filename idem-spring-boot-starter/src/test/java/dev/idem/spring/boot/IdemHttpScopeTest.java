package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idem.http.ScopeResolver;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.Principal;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.WebApplicationContext;

/**
 * Whose key it is, as the starter decides it, in real applications on a real Tomcat and the run's
 * database: with nothing to tell callers apart a guarded application does not start, an
 * application that guards nothing starts as before, and with principals (a resolver bean taking
 * the principal an authentication filter set) one key from two users is two keys.
 */
@ExtendWith(OutputCaptureExtension.class)
@IdemTest
class IdemHttpScopeTest {
  static final HttpClient http = HttpClient.newHttpClient();
  static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
  final TestDatabase db;

  IdemHttpScopeTest(TestDatabase db) {
    this.db = db;
  }

  @BeforeAll
  static void tables(TestDatabase db) {
    db.execute("CREATE TABLE effects (" + Vendors.autoId(db) + ", order_id text NOT NULL)");
  }

  SpringApplicationBuilder app(Class<?> config) {
    return new SpringApplicationBuilder(config).properties(Map.of(
        "spring.datasource.url", db.jdbcUrl(), "spring.flyway.enabled", "false", "server.port", "0"));
  }

  record Order(String order) {}

  @RestController
  static class Guarded {
    final JdbcTemplate jdbc;

    Guarded(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent
    @PostMapping("/orders")
    Map<String, Object> place(@RequestBody Order o) {
      runs.computeIfAbsent(o.order(), k -> new AtomicInteger()).incrementAndGet();
      long id = jdbc.queryForObject("INSERT INTO effects (order_id) VALUES (?) RETURNING id", Long.class, o.order());
      return Map.of("id", "ord_" + id);
    }
  }

  @RestController
  static class Unguarded {
    final JdbcTemplate jdbc;

    Unguarded(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @PostMapping("/login")
    Map<String, Object> login(@RequestBody Order o) {
      jdbc.update("INSERT INTO effects (order_id) VALUES (?)", o.order());
      return Map.of("ok", true);
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Guarded.class)
  static class NoScope {}

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Unguarded.class)
  static class NothingGuarded {}

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Guarded.class)
  static class Principals {
    /** Keys are the principal's: no Spring Security here, so a resolver bean says so. */
    @Bean
    ScopeResolver scope() {
      return ScopeResolver.PRINCIPAL;
    }

    /** Stands for an authentication filter: the user named by X-User becomes the principal. */
    @Bean
    FilterRegistrationBean<Filter> authentication() {
      FilterRegistrationBean<Filter> r = new FilterRegistrationBean<>((req, res, chain) -> {
        String user = ((HttpServletRequest) req).getHeader("X-User");
        chain.doFilter(user == null ? req : new HttpServletRequestWrapper((HttpServletRequest) req) {
          @Override
          public Principal getUserPrincipal() {
            return () -> user;
          }
        }, res);
      });
      r.setOrder(Ordered.HIGHEST_PRECEDENCE);
      return r;
    }
  }

  /** Stands for an API-key filter with no order of its own: it names the account in a request attribute. */
  static FilterRegistrationBean<Filter> apiKeys(int order) {
    FilterRegistrationBean<Filter> r = new FilterRegistrationBean<>((req, res, chain) -> {
      String user = ((HttpServletRequest) req).getHeader("X-User");
      if (user != null) {
        req.setAttribute("account", "acct-" + user);
      }
      chain.doFilter(req, res);
    });
    r.setOrder(order);
    return r;
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Guarded.class)
  static class ApiKeys {
    @Bean
    ScopeResolver scope() {
      return request -> (String) request.getAttribute("account");
    }

    /** After the guard's default order, as a filter without an order of its own would be. */
    @Bean
    FilterRegistrationBean<Filter> apiKeyFilter() {
      return apiKeys(Ordered.LOWEST_PRECEDENCE - 5);
    }
  }

  /**
   * An authentication filter ordered after the guard is too late: its requests are refused (403,
   * failing closed). The client is told only that the request names no caller; the server logs,
   * once, that the resolver returned none and that idem.http.filter-order may be the cause. With
   * the guard placed after it ({@code idem.http.filter-order}) the same request is guarded under
   * the account.
   */
  @Test
  void theGuardsFilterOrderPlacesItAfterAnAuthenticationFilter(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = app(ApiKeys.class).run()) {
      HttpResponse<String> early = post(app, "/orders", "k-order", "carol", "{\"order\":\"o-order-early\"}");
      HttpResponse<String> again = post(app, "/orders", "k-order-2", "carol", "{\"order\":\"o-order-early\"}");
      assertThat(early.statusCode()).isEqualTo(403);
      assertThat(again.statusCode()).isEqualTo(403);
      assertThat(early.body()).contains("does not say which caller it comes from")
          .doesNotContain("idem.http", "ScopeResolver", "authenticated");
      String log = output.getOut() + output.getErr();
      String warned = "the ScopeResolver returned no caller (null or blank)";
      assertThat(log).contains("WARN").contains("POST /orders").contains(warned).contains("idem.http.filter-order");
      assertThat(log.split(java.util.regex.Pattern.quote(warned), -1)).hasSize(2); // once, not per request
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'o-order-early'")).isZero();
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key IN ('k-order', 'k-order-2')")).isZero();
    }
    try (ConfigurableApplicationContext app = app(ApiKeys.class)
        .properties("idem.http.filter-order=" + Ordered.LOWEST_PRECEDENCE).run()) {
      HttpResponse<String> first = post(app, "/orders", "k-order", "carol", "{\"order\":\"o-order\"}");
      HttpResponse<String> again = post(app, "/orders", "k-order", "carol", "{\"order\":\"o-order\"}");
      assertThat(first.statusCode()).isEqualTo(200);
      assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'o-order'")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-order' AND scope = 'acct-carol'")).isEqualTo(1);
    }
  }

  /** Guards switched off on purpose: the handler runs unguarded, and start-up says so, naming it and the url patterns. */
  @Test
  void withHttpGuardsDisabledAnIdempotentHandlerRunsUnguardedAndStartUpWarns(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = app(NoScope.class)
        .properties("idem.http.enabled=false", "idem.http.url-patterns=/payments/*").run()) {
      assertThat(output.getOut() + output.getErr()).contains("WARN").contains("NOT guarded").contains("Guarded.place")
          .contains("idem.http.url-patterns=[/payments/*]");
      HttpResponse<String> noKey = post(app, "/orders", null, null, "{\"order\":\"o-disabled\"}");
      HttpResponse<String> again = post(app, "/orders", "k-disabled", null, "{\"order\":\"o-disabled\"}");
      assertThat(noKey.statusCode()).isEqualTo(200);
      assertThat(again.statusCode()).isEqualTo(200);
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'o-disabled'")).isEqualTo(2);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-disabled'")).isZero();
    }
  }

  /** Without Spring's transaction manager the guard cannot run: start-up fails naming the handler. */
  @Test
  void anIdempotentHandlerThatWouldRunUnguardedByAccidentStopsStartUp() {
    assertThatThrownBy(() -> app(Principals.class).properties("spring.autoconfigure.exclude="
        + "org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration,"
        + "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration").run())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("Guarded.place").hasMessageContaining("PlatformTransactionManager")
        .hasMessageContaining("idem.http.enabled=false")
        .satisfies(thrown -> assertThat(analysis(thrown).getAction()).contains("idem.http.enabled=false"));
  }

  /**
   * The refusal reads as Boot's failure report, not a stack trace: what idem found, then the three
   * ways to fix it.
   */
  @Test
  void aGuardedApplicationWithNothingToTellCallersApartDoesNotStart(CapturedOutput output) {
    Throwable thrown = catchThrowable(() -> app(NoScope.class).run());
    assertThat(thrown)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("@Idempotent Guarded.place")
        .hasMessageContaining("idem.http.scope-header")
        .hasMessageContaining("dev.idem.http.ScopeResolver")
        .hasMessageContaining("Spring Security");
    FailureAnalysis analysis = analysis(thrown);
    assertThat(analysis.getDescription()).contains("@Idempotent Guarded.place").contains("cannot tell callers apart")
        .doesNotContain("idem.http.scope-header");
    assertThat(analysis.getAction()).startsWith("Scope keys in one of three ways").contains("idem.http.scope-header")
        .contains("dev.idem.http.ScopeResolver").contains("Spring Security");
    assertThat(output.getOut() + output.getErr()).contains("APPLICATION FAILED TO START")
        .contains("Description:" + System.lineSeparator() + System.lineSeparator() + analysis.getDescription())
        .contains("Action:" + System.lineSeparator() + System.lineSeparator() + analysis.getAction());
  }

  /** Two ways of naming the caller: refused at start-up, in Boot's report, and in English for two. */
  @Test
  void twoWaysOfScopingKeysStopStartUpNamingBoth(CapturedOutput output) {
    Throwable thrown = catchThrowable(() -> app(Principals.class).properties("idem.http.scope-header=X-Tenant-Id").run());
    FailureAnalysis analysis = analysis(thrown);
    assertThat(analysis.getDescription()).isEqualTo("idem.http: keys are scoped in one way, and"
        + " idem.http.scope-header=X-Tenant-Id and a ScopeResolver bean are both set.");
    assertThat(analysis.getAction()).isEqualTo("Keep one of them.");
    assertThat(output.getOut() + output.getErr()).contains("APPLICATION FAILED TO START")
        .contains(analysis.getDescription());
  }

  @RestController
  static class BadWindow {
    @Idempotent(window = "soon")
    @PostMapping("/orders")
    Map<String, Object> place(@RequestBody Order o) {
      return Map.of();
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(BadWindow.class)
  static class BadWindowApp {}

  @Test
  void aBadAttributeOnAnIdempotentHandlerStopsStartUpNamingIt() {
    FailureAnalysis analysis = analysis(catchThrowable(() -> app(BadWindowApp.class).run()));
    assertThat(analysis.getDescription())
        .startsWith("@Idempotent on dev.idem.spring.boot.IdemHttpScopeTest$BadWindow.place: window \"soon\" is not a duration");
    assertThat(analysis.getAction()).contains("\"24h\"");
  }

  /** The analysis Boot prints for a failed start-up: idem's, found anywhere in the cause chain. */
  static FailureAnalysis analysis(Throwable startUpFailure) {
    assertThat(startUpFailure).isNotNull();
    FailureAnalysis analysis = new IdemSetupFailureAnalyzer().analyze(startUpFailure);
    assertThat(analysis).as("idem's analysis of %s", startUpFailure).isNotNull();
    assertThat(analysis.getCause()).isInstanceOf(IdemSetupException.class);
    return analysis;
  }

  /**
   * The IdempotencyKeyFilter bean is run by the guard only: the container maps the guard alone,
   * and Boot's line about the bean's disabled registration says what it is, not that idem is off.
   */
  @Test
  void onlyTheGuardIsMappedAndTheDisabledRegistrationSaysWhatItIs(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = app(Principals.class).run()) {
      jakarta.servlet.ServletContext servlet = ((WebApplicationContext) app).getServletContext();
      assertThat(servlet.getFilterRegistrations().values())
          .noneMatch(r -> r.getClassName().equals(dev.idem.http.IdempotencyKeyFilter.class.getName()));
      assertThat(servlet.getFilterRegistration("idempotencyKeyFilter").getClassName())
          .isEqualTo(IdemHttpGuards.class.getName());
      String log = output.getOut() + output.getErr();
      assertThat(log).doesNotContain("idempotencyKeyFilterRegistration was not registered")
          .contains("Filter " + IdemHttpAutoConfiguration.URL_FILTER_NAME + " was not registered (disabled)");

      HttpResponse<String> first = post(app, "/orders", "k-mapped", "dave", "{\"order\":\"o-mapped\"}");
      HttpResponse<String> again = post(app, "/orders", "k-mapped", "dave", "{\"order\":\"o-mapped\"}");
      assertThat(first.statusCode()).isEqualTo(200);
      assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'o-mapped'")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-mapped' AND scope = 'dave'")).isEqualTo(1);
    }
  }

  @Test
  void anApplicationThatGuardsNothingStartsAndItsPostsNeedNoKey() throws Exception {
    try (ConfigurableApplicationContext app = app(NothingGuarded.class).run()) {
      long keys = db.count("SELECT count(*) FROM idem_keys");
      HttpResponse<String> login = post(app, "/login", null, null, "{\"order\":\"login-1\"}");
      assertThat(login.statusCode()).isEqualTo(200);
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'login-1'")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys")).isEqualTo(keys);
    }
  }

  @Test
  void oneKeyFromTwoPrincipalsIsTwoKeysAndARequestWithoutOneIsRefused(CapturedOutput output) throws Exception {
    try (ConfigurableApplicationContext app = app(Principals.class).run()) {
      HttpResponse<String> anonymous = post(app, "/orders", "k-users", null, "{\"order\":\"o-users\"}");
      HttpResponse<String> alice = post(app, "/orders", "k-users", "alice", "{\"order\":\"o-users\"}");
      HttpResponse<String> bob = post(app, "/orders", "k-users", "bob", "{\"order\":\"o-users\"}");
      HttpResponse<String> aliceAgain = post(app, "/orders", "k-users", "alice", "{\"order\":\"o-users\"}");

      assertThat(anonymous.statusCode()).isEqualTo(403);
      assertThat(anonymous.body()).contains("does not say which caller it comes from");
      assertThat(output.getOut() + output.getErr()).contains("WARN").contains("no principal was found");
      assertThat(alice.statusCode()).isEqualTo(200);
      assertThat(bob.statusCode()).isEqualTo(200);
      assertThat(bob.body()).isNotEqualTo(alice.body());
      assertThat(aliceAgain.body()).isEqualTo(alice.body());
      assertThat(aliceAgain.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(runs.get("o-users")).hasValue(2);
      assertThat(db.count("SELECT count(*) FROM effects WHERE order_id = 'o-users'")).isEqualTo(2);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-users' AND scope IN ('alice', 'bob')"))
          .isEqualTo(2);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'k-users'")).isEqualTo(2);
    }
  }

  static HttpResponse<String> post(ConfigurableApplicationContext app, String path, String key, String user, String json)
      throws Exception {
    URI base = URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
    HttpRequest.Builder r = HttpRequest.newBuilder(base.resolve(path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(json));
    if (key != null) {
      r.header("Idempotency-Key", key);
    }
    if (user != null) {
      r.header("X-User", user);
    }
    return http.send(r.build(), HttpResponse.BodyHandlers.ofString());
  }
}
