package dev.idem.examples.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.spring.RelayLifecycle;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.Poll;
import dev.idem.testing.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The Boot payments sample as a client sees it, over real HTTP on loopback, against a real
 * PostgreSQL and a card provider on loopback; every check also counts rows (payments, receipts,
 * idem's keys) and the provider's charges.
 */
class PaymentsApplicationTest {
  static TestDatabase db;
  static CardProviderServer provider;
  static ConfigurableApplicationContext app;
  static URI base;
  static final HttpClient http = HttpClient.newHttpClient();

  @BeforeAll
  static void start() throws Exception {
    db = TestPostgres.newDatabase("boot-payments");
    provider = new CardProviderServer();
    // as command-line arguments, which override application.properties
    app = new SpringApplicationBuilder(PaymentsApplication.class).run(
        "--spring.datasource.url=" + db.jdbcUrl(),
        "--server.port=0",
        "--payments.provider-url=" + provider.url(),
        "--idem.http.window=3s");
    base = URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
  }

  @AfterAll
  static void stop() {
    if (app != null) {
      app.close();
    }
    if (provider != null) {
      provider.close();
    }
    db.close();
  }

  static HttpResponse<String> pay(String key, String order, int amount) throws Exception {
    HttpRequest.Builder r = HttpRequest.newBuilder(base.resolve("/payments")).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString("{\"order\":\"" + order + "\",\"amount\":" + amount + "}"));
    if (key != null) {
      r.header("Idempotency-Key", "\"" + key + "\"");
    }
    return http.send(r.build(), HttpResponse.BodyHandlers.ofString());
  }

  static long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  static long httpKeys(String key) {
    return db.count("SELECT count(*) FROM idem.idem_keys WHERE scope = 'anonymous' AND key = ?", key);
  }

  static long receipts(String order) {
    return db.count("SELECT count(*) FROM receipts WHERE order_id = ?", order);
  }

  static long chargesAtProvider() {
    return provider.charges.size();
  }

  static void assertProblem(HttpResponse<String> r, int status) {
    assertThat(r.statusCode()).isEqualTo(status);
    assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
    assertThat(r.body()).contains("\"status\":" + status);
  }

  @Test
  void aRetriedPaymentIsChargedAndRecordedOnceAndItsReceiptWrittenOnce() throws Exception {
    long before = chargesAtProvider();
    HttpResponse<String> first = pay("k-o1", "o1", 4000);
    HttpResponse<String> retry = pay("k-o1", "o1", 4000);
    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(retry.statusCode()).isEqualTo(201);
    assertThat(retry.body()).isEqualTo(first.body());
    assertThat(retry.headers().firstValue("Location")).isEqualTo(first.headers().firstValue("Location")).hasValue("/payments/o1");
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(payments("o1")).isEqualTo(1);
    assertThat(httpKeys("k-o1")).isEqualTo(1);
    assertThat(chargesAtProvider()).isEqualTo(before + 1);
    Poll.until("the receipt of o1", () -> receipts("o1") == 1);
  }

  @Test
  void theProviderChargesOnceThroughALostReply() throws Exception {
    long before = chargesAtProvider();
    int requestsBefore = provider.requests.size();
    provider.loseNextReply.set(true);
    HttpResponse<String> r = pay("k-lost", "o-lost", 2500);
    assertThat(r.statusCode()).isEqualTo(201);
    assertThat(payments("o-lost")).isEqualTo(1);
    assertThat(chargesAtProvider()).isEqualTo(before + 1);
    List<String> sent = provider.requests.subList(requestsBefore, provider.requests.size());
    assertThat(sent).hasSize(2).containsOnly(sent.get(0)); // the retry carried the same key
  }

  @Test
  void aDeclineIsStoredAndReplayedWithItsStatus() throws Exception {
    HttpResponse<String> declined = pay("k-402", "o-402", 20_000);
    HttpResponse<String> again = pay("k-402", "o-402", 20_000);
    assertThat(declined.statusCode()).isEqualTo(402);
    assertThat(declined.body()).contains("insufficient funds");
    assertThat(again.statusCode()).isEqualTo(402);
    assertThat(again.body()).isEqualTo(declined.body());
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(payments("o-402")).isZero();
    assertThat(httpKeys("k-402")).isEqualTo(1);
  }

  @Test
  void badRequestsGet400And422WithProblemBodiesAndWriteNothing() throws Exception {
    assertProblem(pay(null, "o-nokey", 100), 400);
    assertThat(payments("o-nokey")).isZero();

    HttpRequest malformed = HttpRequest.newBuilder(base.resolve("/payments")).header("Idempotency-Key", "\"a\", \"b\"")
        .POST(HttpRequest.BodyPublishers.ofString("{\"order\":\"o-bad\",\"amount\":1}")).build();
    assertProblem(http.send(malformed, HttpResponse.BodyHandlers.ofString()), 400);

    assertThat(pay("k-422", "o-422", 100).statusCode()).isEqualTo(201);
    assertProblem(pay("k-422", "o-422", 999), 422);
    assertThat(payments("o-422")).isEqualTo(1);

    // the controller's own validation failure is not stored: fixed, the same key runs
    assertThat(pay("k-fix", "o-fix", -5).statusCode()).isEqualTo(400);
    assertThat(httpKeys("k-fix")).isZero();
    assertThat(pay("k-fix", "o-fix", 5).statusCode()).isEqualTo(201);
    assertThat(payments("o-fix")).isEqualTo(1);
  }

  @Test
  void aCopyWhileTheFirstIsAtTheProviderGets409WithRetryAfter() throws Exception {
    provider.hold = new CountDownLatch(1);
    provider.held = new CountDownLatch(1);
    try {
      CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> {
        try {
          return pay("k-409", "o-409", 700);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      assertThat(provider.held.await(20, TimeUnit.SECONDS)).isTrue();
      HttpResponse<String> copy = pay("k-409", "o-409", 700);
      assertProblem(copy, 409);
      assertThat(copy.headers().firstValue("Retry-After")).isPresent();
      provider.hold.countDown();
      assertThat(first.get(20, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
    } finally {
      provider.hold.countDown();
    }
    assertThat(pay("k-409", "o-409", 700).headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(payments("o-409")).isEqualTo(1);
  }

  @Test
  void aKeyUsedAgainAfterItsWindowRunsAgainButTheChargeIsNotRepeated() throws Exception {
    long before = chargesAtProvider();
    assertThat(pay("k-window", "o-window", 300).statusCode()).isEqualTo(201);
    Thread.sleep(3_200); // idem.http.window is 3 s here
    HttpResponse<String> late = pay("k-window", "o-window", 300);
    assertThat(late.statusCode()).isEqualTo(201);
    assertThat(late.headers().firstValue("Idempotent-Replayed")).isEmpty(); // the handler ran again
    assertThat(httpKeys("k-window")).isEqualTo(1);
    // the charge has its own key (the order, remembered 24 h): the provider was not called again
    assertThat(chargesAtProvider()).isEqualTo(before + 1);
    assertThat(payments("o-window")).isEqualTo(2); // the sample's payments table has no unique order: the HTTP window was too short
  }

  @Test
  void anOuterTransactionThatRollsBackLeavesNeitherKeyNorPayment() {
    TransactionTemplate tx = app.getBean(TransactionTemplate.class);
    Checkout checkout = app.getBean(Checkout.class);
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> tx.executeWithoutResult(s -> {
      checkout.pay("o-rollback", 100);
      throw new IllegalStateException("the caller fails after paying");
    })).hasMessageContaining("the caller fails");
    assertThat(payments("o-rollback")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem.idem_outbox WHERE aggregate_key = 'o-rollback'")).isZero();
    // the charge's own key committed before the call went out, so paying again does not charge again
    long before = chargesAtProvider();
    tx.executeWithoutResult(s -> checkout.pay("o-rollback", 100));
    assertThat(payments("o-rollback")).isEqualTo(1);
    assertThat(chargesAtProvider()).isEqualTo(before);
  }

  @Test
  void aRedeliveredMessageAppliesOnce() throws Exception {
    assertThat(pay("k-redeliver", "o-redeliver", 100).statusCode()).isEqualTo(201);
    Poll.until("the receipt of o-redeliver", () -> receipts("o-redeliver") == 1);
    ReceiptBroker broker = app.getBean(ReceiptBroker.class);
    OutboxMessage again = broker.log().stream().filter(m -> "o-redeliver".equals(m.aggregateKey())).findFirst().orElseThrow();
    broker.redeliver(again);
    broker.redeliver(again);
    Poll.until("the inbox row of the message", () -> db.count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = 'receipts' AND message_id = ?", again.id().toString()) == 1);
    Thread.sleep(300); // both redeliveries consumed
    assertThat(receipts("o-redeliver")).isEqualTo(1);
  }

  @Test
  void theRelayStopsAndStartsWithTheContext() throws Exception {
    RelayLifecycle relay = app.getBean(RelayLifecycle.class);
    assertThat(relay.isRunning()).isTrue();
    app.stop();
    try {
      assertThat(relay.isRunning()).isFalse();
      app.getBean(TransactionTemplate.class).executeWithoutResult(s -> app.getBean(Checkout.class).pay("o-stopped", 100));
      Thread.sleep(300); // the relay is stopped: the message waits
      assertThat(db.count("SELECT count(*) FROM idem.idem_outbox WHERE aggregate_key = 'o-stopped' AND status = 'P'")).isEqualTo(1);
    } finally {
      app.start();
    }
    assertThat(relay.isRunning()).isTrue();
    Poll.until("the receipt of o-stopped", () -> receipts("o-stopped") == 1);
  }
}
