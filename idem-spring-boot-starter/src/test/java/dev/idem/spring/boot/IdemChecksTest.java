package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.executor.OutcomeCompleter;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.reconcile.ProviderEffect;
import dev.idem.jdbc.reconcile.ProviderRecords;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * The scheduled checks in real applications (real Tomcat on loopback, Actuator, the run's
 * database): a planted break is in the meters and in {@code /actuator/idem} after a run, read over
 * HTTP and compared with the effect table; off by default, nothing runs and no lease is taken; two
 * instances at once run the checks once per interval, told by the lease row's token. Every test
 * has a lease resource of its own.
 */
@IdemTest(sql = {"CREATE TABLE charges (id varchar(64) PRIMARY KEY, order_key varchar(255), amount int NOT NULL)",
    "CREATE TABLE card_charges (id varchar(64) PRIMARY KEY, payment_ref varchar(255), amount int NOT NULL)"})
class IdemChecksTest {
  static TestDatabase db;
  static final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  static final ObjectMapper json = new ObjectMapper();
  final List<ConfigurableApplicationContext> apps = new ArrayList<>();

  @BeforeAll
  static void plant(TestDatabase database) {
    db = database;
    // o-1 charged twice (a duplicate effect), o-2 once, one charge with no key
    db.execute("INSERT INTO charges (id, order_key, amount) VALUES ('c1', 'o-1', 10), ('c2', 'o-1', 10), ('c3', 'o-2', 5),"
        + " ('c4', NULL, 7)");
  }

  @AfterEach
  void stop() {
    apps.forEach(ConfigurableApplicationContext::close);
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class App {}

  /**
   * An application with what the provider did (a {@code ProviderRecords} reading the card
   * provider's table, as a user's would call its list API) and an {@code OutcomeCompleter} of its
   * payments executor whose resolver finds every call charged.
   */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class WithProvider {
    @Bean
    IdempotentExecutor payments(Idem idem) {
      return idem.executor().name("checks-payments").build();
    }

    @Bean
    OutcomeCompleter paymentsCompleter(IdempotentExecutor payments) {
      return payments.completer(Codec.utf8(), attempt -> Optional.of("charged " + attempt.callKey().value()), COMPLETER_SCOPE);
    }

    @Bean
    ProviderRecords cardProvider() {
      return (from, to) -> {
        List<ProviderEffect> effects = new ArrayList<>();
        try (Connection c = DriverManager.getConnection(db.jdbcUrl());
            ResultSet rs = c.createStatement().executeQuery("SELECT id, payment_ref, amount FROM card_charges")) {
          while (rs.next()) {
            effects.add(new ProviderEffect(rs.getString(1), null, rs.getString(2), rs.getLong(3), to.minusSeconds(1)));
          }
        }
        return effects;
      };
    }
  }

  static final String COMPLETER_SCOPE = "checks-completer";

  /** An application on the class's database with {@code properties} besides the database's and the port's. */
  ConfigurableApplicationContext start(String... properties) {
    return start(App.class, properties);
  }

  ConfigurableApplicationContext start(Class<?> application, String... properties) {
    Map<String, Object> p = new HashMap<>(Map.of("spring.datasource.url", db.jdbcUrl(), "server.port", "0",
        "spring.flyway.enabled", "false", "spring.datasource.hikari.maximum-pool-size", "4",
        "management.endpoints.web.exposure.include", "idem,metrics"));
    for (String kv : properties) {
      int eq = kv.indexOf('=');
      p.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
    ConfigurableApplicationContext app = new SpringApplicationBuilder(application).properties(p).run();
    apps.add(app);
    return app;
  }

  static JsonNode get(ConfigurableApplicationContext app, String path) throws Exception {
    HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
        + app.getEnvironment().getProperty("local.server.port") + path)).timeout(Duration.ofSeconds(30)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(path + ": " + r.body()).isEqualTo(200);
    return json.readTree(r.body());
  }

  /** The value of a meter read through {@code /actuator/metrics}, tags as {@code name:value}. */
  static double meter(ConfigurableApplicationContext app, String name, String... tags) throws Exception {
    StringBuilder q = new StringBuilder("/actuator/metrics/" + name + "?");
    for (String t : tags) {
      q.append("tag=").append(URLEncoder.encode(t, StandardCharsets.UTF_8)).append('&');
    }
    return get(app, q.toString()).path("measurements").get(0).path("value").asDouble();
  }

  static IdemChecks checks(ConfigurableApplicationContext app) {
    return app.getBean(IdemChecks.class);
  }

  static long token(String resource) {
    return db.count("SELECT token FROM idem_leases WHERE resource = ?", resource);
  }

  static long leaseRows(String resource) {
    return db.count("SELECT count(*) FROM idem_leases WHERE resource = ?", resource);
  }

  /** Ends the lease by the database clock, as the passing of an interval does. */
  static void intervalPasses(String resource) {
    db.execute("UPDATE idem_leases SET expires_at = " + Vendors.sql(db, "now() - interval '1 second'",
        "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND") + " WHERE resource = '" + resource + "'");
  }

  @Test
  void aPlantedDuplicateIsInTheMeterAndTheEndpointAfterARun() throws Exception {
    ConfigurableApplicationContext app = start("idem.checks.enabled=true", "idem.checks.lease-resource=checks-planted",
        "idem.checks.effect-tables.charges.key-column=order_key",
        "idem.checks.effect-tables.gone.key-column=order_key"); // a table that does not exist: that check fails alone
    Poll.until("a run of the checks", () -> checks(app).last() != null);

    JsonNode view = get(app, "/actuator/idem").path("checks");
    JsonNode run = view.path("lastRun");
    JsonNode charges = run.path("checks").path("reconcile:charges");
    long duplicated = db.count("SELECT count(*) FROM (SELECT order_key FROM charges WHERE order_key IS NOT NULL"
        + " GROUP BY order_key HAVING count(*) > 1) d");
    assertThat(duplicated).isEqualTo(1);
    assertThat(charges.path("counts").path("duplicate_effect").asLong()).isEqualTo(duplicated);
    assertThat(charges.path("counts").path("effect_without_key").asLong())
        .isEqualTo(db.count("SELECT count(*) FROM charges WHERE order_key IS NULL")).isEqualTo(1);
    assertThat(charges.path("counts").path("key_without_effect").asLong()).isZero(); // no scope given: not checked
    JsonNode dup = charges.path("examples").path("duplicate_effect").get(0);
    assertThat(List.of(dup.path("key").asText(), dup.path("effects").asLong()))
        .containsExactly("o-1", db.count("SELECT count(*) FROM charges WHERE order_key = 'o-1'"));
    assertThat(run.path("checks").path("reconcile:gone").path("error").asText()).contains("gone");
    assertThat(run.path("current").asBoolean()).isTrue();
    // the run's time is the database's, and its lease is the row's one grant, to this instance
    assertThat(run.path("at").asText()).isNotEmpty();
    assertThat(run.path("leaseToken").asLong()).isEqualTo(token("checks-planted")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_leases WHERE resource = 'checks-planted' AND holder = ?",
        checks(app).holderName())).isEqualTo(1);

    assertThat(meter(app, IdemChecksMeters.FINDINGS, "check:reconcile:charges", "kind:duplicate_effect")).isEqualTo(duplicated);
    assertThat(meter(app, IdemChecksMeters.FINDINGS, "check:reconcile:charges", "kind:effect_without_key")).isEqualTo(1);
    assertThat(meter(app, IdemChecksMeters.FINDINGS, "check:reconcile:charges", "kind:key_without_effect")).isZero();
    assertThat(meter(app, IdemChecksMeters.RUNS, "outcome:ran")).isEqualTo(1);
    assertThat(meter(app, IdemChecksMeters.RUNS, "outcome:skipped")).isZero();
    assertThat(meter(app, IdemChecksMeters.FAILURES, "check:reconcile:gone")).isEqualTo(1);
    assertThat(meter(app, IdemChecksMeters.FAILURES, "check:reconcile:charges")).isZero();
  }

  @Test
  void offByDefaultNothingRunsAndNoLeaseIsTaken() throws Exception {
    ConfigurableApplicationContext app = start("idem.checks.lease-resource=checks-off",
        "idem.checks.effect-tables.charges.key-column=order_key");
    assertThat(app.getBeanNamesForType(IdemChecks.class)).isEmpty();
    assertThat(app.getBeanNamesForType(IdemChecksMeters.class)).isEmpty();
    assertThat(get(app, "/actuator/idem").has("checks")).isFalse();
    assertThat(leaseRows("checks-off")).isZero();
    assertThat(leaseRows(IdemChecks.DEFAULT_RESOURCE)).isZero();
  }

  @Test
  void twoInstancesAtOnceRunTheChecksOncePerInterval() throws Exception {
    String[] props = {"idem.checks.enabled=true", "idem.checks.lease-resource=checks-two", "idem.checks.interval=1h",
        "idem.checks.effect-tables.charges.key-column=order_key"};
    List<IdemChecks> both = List.of(checks(start(props)), checks(start(props)));
    Poll.until("each instance's first tick", () -> both.stream().allMatch(c ->
        c.ticks(IdemChecks.Outcome.RAN) + c.ticks(IdemChecks.Outcome.SKIPPED) + c.ticks(IdemChecks.Outcome.FAILED) == 1));
    assertThat(both).extracting(c -> c.ticks(IdemChecks.Outcome.FAILED)).containsExactly(0L, 0L);
    assertThat(both.stream().mapToLong(c -> c.ticks(IdemChecks.Outcome.RAN)).sum()).isEqualTo(token("checks-two")).isEqualTo(1);
    IdemChecks ran = both.stream().filter(c -> c.ticks(IdemChecks.Outcome.RAN) == 1).findFirst().orElseThrow();
    IdemChecks skipped = both.stream().filter(c -> c != ran).findFirst().orElseThrow();
    assertThat(skipped.ticks(IdemChecks.Outcome.SKIPPED)).isEqualTo(1);
    assertThat(skipped.last()).isNull();
    assertThat(db.count("SELECT count(*) FROM idem_leases WHERE resource = 'checks-two' AND holder = ?", ran.holderName()))
        .isEqualTo(1);
    // within the interval nobody runs again, the instance that ran included
    assertThat(List.of(ran.runOnce(), skipped.runOnce())).containsOnly(IdemChecks.Outcome.SKIPPED);
    assertThat(token("checks-two")).isEqualTo(1);
    assertThat(ran.count("reconcile:charges", ScheduledCheck.DUPLICATE_EFFECT)).isNaN(); // it can no longer tell it is the latest

    // the next interval: both tick at once, one runs
    intervalPasses("checks-two");
    CountDownLatch go = new CountDownLatch(1);
    List<CompletableFuture<IdemChecks.Outcome>> ticks = both.stream().map(c -> CompletableFuture.supplyAsync(() -> {
      try {
        go.await();
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
      return c.runOnce();
    })).toList();
    go.countDown();
    assertThat(ticks.stream().map(CompletableFuture::join).toList())
        .containsExactlyInAnyOrder(IdemChecks.Outcome.RAN, IdemChecks.Outcome.SKIPPED);
    assertThat(token("checks-two")).isEqualTo(2);
    assertThat(both.stream().mapToLong(c -> c.ticks(IdemChecks.Outcome.RAN)).sum()).isEqualTo(token("checks-two"));
    IdemChecks second = both.stream().filter(c -> c.last() != null && c.last().token() == 2).findFirst().orElseThrow();
    assertThat(second.count("reconcile:charges", ScheduledCheck.DUPLICATE_EFFECT)).isEqualTo(1);
  }

  @Test
  void aShortIntervalRunsAgainEachTimeUnderANewGrant() throws Exception {
    ConfigurableApplicationContext app = start("idem.checks.enabled=true", "idem.checks.lease-resource=checks-short",
        "idem.checks.interval=1s");
    IdemChecks c = checks(app);
    Poll.until("a second run", () -> c.ticks(IdemChecks.Outcome.RAN) >= 2);
    app.close(); // no tick after this
    assertThat(c.ticks(IdemChecks.Outcome.RAN)).isEqualTo(token("checks-short"));
    assertThat(c.last().token()).isEqualTo(token("checks-short"));
  }

  /**
   * With a provider named for a table and a completer defined, a run reports the provider's double
   * charge and its charge for no payment of ours, and finishes a key whose call threw (in flight,
   * lease ended) from what the resolver found: the key's row is completed with it.
   */
  @Test
  void aRunChecksTheProviderAndFinishesAStuckKey() throws Exception {
    // o-2 has one charge row of ours but two at the provider; ch_3 is for no payment of ours
    db.execute("INSERT INTO card_charges (id, payment_ref, amount) VALUES ('ch_1', 'o-2', 5), ('ch_2', 'o-2', 5),"
        + " ('ch_3', 'o-none', 7)");
    ConfigurableApplicationContext app = start(WithProvider.class, "idem.checks.enabled=true",
        "idem.checks.lease-resource=checks-provider", "idem.checks.interval=1s", "idem.checks.lineage=true",
        "idem.checks.effect-tables.charges.key-column=order_key", "idem.checks.effect-tables.charges.provider=cardProvider");
    IdemChecks c = checks(app);
    // each run's count is that run's: add them up, as a counter of finished keys would
    AtomicLong finished = new AtomicLong();
    c.onRun(run -> {
      IdemChecks.CheckRun completer = run.checks().get("complete:paymentsCompleter");
      if (completer != null) {
        finished.addAndGet(completer.counts().getOrDefault(ScheduledCheck.FINISHED, 0L));
      }
    });
    IdempotencyKey stuck = IdempotencyKey.of(COMPLETER_SCOPE, "pay-1");
    IdempotentExecutor payments = app.getBean(IdempotentExecutor.class);
    assertThatThrownBy(() -> payments.executeExternal(stuck, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      throw new java.io.IOException("read timed out"); // the charge may or may not have happened
    })).isInstanceOf(java.io.IOException.class);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ? AND state = 'I'",
        COMPLETER_SCOPE, "pay-1")).as("in flight, its outcome unknown").isEqualTo(1);

    // an intent republished under a new message id, received twice by one consumer
    Inbox orders = app.getBean(Idem.class).inbox("checks-orders").build();
    orders.receive("msg-1", "shop:order-7", tx -> { });
    orders.receive("msg-2", "shop:order-7", tx -> { });
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'checks-orders' AND intent = 'shop:order-7'"))
        .isEqualTo(2);

    Poll.until("a run that saw the republish", () -> c.count("lineage", ScheduledCheck.TWO_IDS_FOR_ONE_INTENT) == 1);
    Poll.until("a run that finished the stuck key", () -> finished.get() == 1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ? AND state = 'C'",
        COMPLETER_SCOPE, "pay-1")).as("completed with the provider's answer").isEqualTo(1);
    assertThat(payments.executeExternal(stuck, Fingerprint.EMPTY, Codec.utf8(), attempt -> "called again"))
        .isInstanceOfSatisfying(Execution.Replayed.class, r -> assertThat(r.value()).asString().startsWith("charged "));

    assertThat(c.count("reconcile:charges", ScheduledCheck.PROVIDER_DUPLICATE)).isEqualTo(1.0);
    long withoutPayment = db.count("SELECT count(*) FROM card_charges p WHERE NOT EXISTS"
        + " (SELECT 1 FROM charges e WHERE e.order_key = p.payment_ref)");
    assertThat(withoutPayment).isEqualTo(1);
    assertThat(c.count("reconcile:charges", ScheduledCheck.PROVIDER_EFFECT_WITHOUT_KEY)).isEqualTo((double) withoutPayment);
    JsonNode charges = get(app, "/actuator/idem").path("checks").path("lastRun").path("checks").path("reconcile:charges");
    assertThat(charges.path("examples").path(ScheduledCheck.PROVIDER_DUPLICATE).get(0).path("intent").asText()).isEqualTo("o-2");
    assertThat(meter(app, IdemChecksMeters.FINDINGS, "check:reconcile:charges", "kind:" + ScheduledCheck.PROVIDER_DUPLICATE))
        .isEqualTo(1.0);
  }

  /** Bad settings stop start-up, naming the property, before any lease is asked for. */
  @Test
  void badSettingsAreRefusedAtStartUpNamingTheProperty() {
    ApplicationContextRunner runner = IdemAutoConfigurationTest.runner(db)
        .withPropertyValues("idem.checks.enabled=true", "idem.checks.lease-resource=checks-bad");
    runner.withPropertyValues("idem.checks.interval=0s").run(ctx -> assertThat(ctx).getFailure()
        .rootCause().hasMessageContaining("idem.checks.interval must be within 1s and 1d"));
    runner.withPropertyValues("idem.checks.effect-tables.charges.schema=public").run(ctx -> assertThat(ctx).getFailure()
        .rootCause().hasMessageContaining("idem.checks.effect-tables.charges.key-column is required"));
    runner.withPropertyValues("idem.checks.effect-tables.old-charges.key-column=order_key").run(ctx -> assertThat(ctx)
        .getFailure().hasStackTraceContaining("idem.checks.effect-tables.old-charges: table 'old-charges'")
        .hasStackTraceContaining("unless idem.checks.effect-tables.old-charges.table is set"));
    runner.withPropertyValues("idem.checks.effect-tables.charges.key-column=order_key",
        "idem.checks.effect-tables.charges.provider=nobody").run(ctx -> assertThat(ctx).getFailure()
        .hasStackTraceContaining("idem.checks.effect-tables.charges.provider is 'nobody', which names no ProviderRecords bean"));
    runner.withPropertyValues("idem.checks.lease-resource= ").run(ctx -> assertThat(ctx).getFailure()
        .rootCause().hasMessageContaining("idem.checks.lease-resource"));
    assertThat(leaseRows("checks-bad")).isZero();
  }

  /** An application's own bean named {@code idemChecks} replaces the starter's: nothing of it runs. */
  @Test
  void backsOffFromTheApplicationsOwnBean() {
    IdemAutoConfigurationTest.runner(db)
        .withPropertyValues("idem.checks.enabled=true", "idem.checks.lease-resource=checks-mine")
        .withBean("idemChecks", Runnable.class, () -> () -> {})
        .run(ctx -> {
          assertThat(ctx).hasNotFailed().doesNotHaveBean(IdemChecks.class).doesNotHaveBean(IdemChecksMeters.class);
          assertThat(leaseRows("checks-mine")).isZero();
        });
  }
}
