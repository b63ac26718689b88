package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.Poll;
import dev.idem.window.DedupeWindow;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The builder's options, each on a server of its own, over real HTTP and a real database. */
class FilterOptionsTest extends AbstractHttpTest {

  @Test
  void aKeyReusedAfterItsWindowRunsAgain() throws Exception {
    URI uri = f.serve(b -> b.window(DedupeWindow.of(Duration.ofMillis(300))));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);
    // The window is counted by the database clock: wait until the database says it is over (MariaDB
    // keeps idem's times in UTC).
    Poll.until("the key's window is over", () -> f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ? AND expires_at <= "
        + (HttpFixture.mariadb(f.db) ? "UTC_TIMESTAMP(6)" : "clock_timestamp()"), key) == 1);
    HttpResponse<String> late = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(late.statusCode()).isEqualTo(201);
    assertThat(late.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(late.body()).isNotEqualTo(first.body());
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1); // the row was claimed again for the new intent
  }

  @Test
  void anOptionalKeyLetsARequestWithoutOneThroughUnguarded() throws Exception {
    URI uri = f.serve(b -> b.keyRequired(false));
    String order = HttpFixture.unique("o");
    long keysBefore = f.db.count("SELECT count(*) FROM idem_keys");
    HttpResponse<String> one = f.post(uri, payment(order, 4000, "ok"));
    HttpResponse<String> two = f.post(uri, payment(order, 4000, "ok"));

    assertThat(one.statusCode()).isEqualTo(201);
    assertThat(two.statusCode()).isEqualTo(201);
    assertThat(two.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(f.payments(order)).isEqualTo(2); // no key, no guard
    assertThat(f.db.count("SELECT count(*) FROM idem_keys")).isEqualTo(keysBefore);
  }

  @Test
  void withBareKeysOffOnlyAStructuredFieldStringIsAKey() throws Exception {
    URI uri = f.serve(b -> b.acceptBareKeys(false).headerName("X-Request-Key"));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> bare = f.post(uri, payment(order, 4000, "ok"), "X-Request-Key", key);
    HttpResponse<String> quoted = f.post(uri, payment(order, 4000, "ok"), "X-Request-Key", "\"" + key + "\"");

    assertThat(bare.statusCode()).isEqualTo(400);
    assertThat(json(bare).get("detail").asText()).contains("double quotes");
    assertThat(quoted.statusCode()).isEqualTo(201);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void aSmallBodyLimitRefusesALargerBodyWith413() throws Exception {
    URI uri = f.serve(b -> b.maxBodySize(32).problemTypeBase(URI.create("https://api.example.com/problems/")));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> r = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);

    assertThat(r.statusCode()).isEqualTo(413);
    assertThat(json(r).get("type").asText()).isEqualTo("https://api.example.com/problems/request-too-large");
    assertThat(f.payments(order)).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void rawBodyFingerprintsTellMemberOrderApart() throws Exception {
    URI uri = f.serve(b -> b.fingerprint(RequestFingerprint.rawBody()));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> reordered = f.post(uri,
        "{\"amount\":4000,\"order\":\"" + order + "\",\"card\":\"ok\"}", "Idempotency-Key", key);

    assertThat(reordered.statusCode()).isEqualTo(422);
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void selectedJsonFieldsAndHeadersAreAllThatIsCompared() throws Exception {
    URI uri = f.serve(b -> b.fingerprint(RequestFingerprint.jsonFields("/order", "/amount").withHeaders("X-Currency")));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Currency", "EUR");
    HttpResponse<String> otherCard = f.post(uri,
        "{\"order\":\"" + order + "\",\"amount\":4000,\"card\":\"declined\",\"note\":\"retry\"}",
        "Idempotency-Key", key, "X-Currency", "EUR");
    HttpResponse<String> otherCurrency = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key,
        "X-Currency", "USD");

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(otherCard.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(otherCard.body()).isEqualTo(first.body());
    assertThat(otherCurrency.statusCode()).isEqualTo(422);
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void aStorePolicyCanStoreA404AndNotA402() throws Exception {
    URI uri = f.serve(b -> b.storePolicy(StorePolicy.DEFAULT.alsoStoring(404).notStoring(402)));
    String order = HttpFixture.unique("o");
    String notFound = HttpFixture.unique("k");
    String declined = HttpFixture.unique("k");
    f.post(uri, payment(order, 1, "status-404"), "Idempotency-Key", notFound);
    HttpResponse<String> replayed404 = f.post(uri, payment(order, 1, "status-404"), "Idempotency-Key", notFound);
    HttpResponse<String> decline = f.post(uri, payment(order, 2, "declined"), "Idempotency-Key", declined);

    assertThat(replayed404.statusCode()).isEqualTo(404);
    assertThat(replayed404.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(decline.statusCode()).isEqualTo(402);
    assertThat(f.payments(order)).isEqualTo(1); // the 404's row; the decline's rolled back
    assertThat(f.keyRows(notFound)).isEqualTo(1);
    assertThat(f.keyRows(declined)).isZero();
  }

  /**
   * Two instances of the service on one database: a copy with another request that reaches the
   * other instance while the first runs cannot see the first's uncommitted claim, so it gets 409;
   * once the first commits, it gets 422. (In one instance it gets 422 at once.)
   */
  @Test
  void onAnotherInstanceAnotherRequestUnderAKeyInFlightIs409UntilTheFirstCommitsThen422() throws Exception {
    URI one = f.serve(b -> b);
    URI two = f.serve(b -> b);
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> {
      try {
        return f.post(one, payment(order, 4000, "block"), "Idempotency-Key", key);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> whileRunning = f.post(two, payment(order, 9900, "block"), "Idempotency-Key", key);
    gate.countDown();
    assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
    HttpResponse<String> afterCommit = f.post(two, payment(order, 9900, "block"), "Idempotency-Key", key);

    assertThat(whileRunning.statusCode()).isEqualTo(409);
    assertThat(afterCommit.statusCode()).isEqualTo(422);
    assertThat(f.payments(order)).isEqualTo(1);
  }

  /** A framework's transaction around the guarded call: idem's own inTransaction stands in for it. */
  @Test
  void aRequestTransactionWrapsTheGuardedCallAndRollsBackWhatIsNotStored() throws Exception {
    AtomicInteger transactions = new AtomicInteger();
    RequestTransaction framework = new RequestTransaction() {
      @Override
      public <T> T run(Callable<T> work) throws Exception {
        transactions.incrementAndGet();
        return f.idem.inTransaction(tx -> work.call());
      }
    };
    URI uri = f.serve(b -> b.transaction(framework));
    String order = HttpFixture.unique("o");
    String stored = HttpFixture.unique("k");
    String refused = HttpFixture.unique("k");
    HttpResponse<String> created = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", stored);
    HttpResponse<String> repeat = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", stored);
    HttpResponse<String> invalid = f.post(uri, payment(order, 1, "status-400"), "Idempotency-Key", refused);

    assertThat(created.statusCode()).isEqualTo(201);
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(invalid.statusCode()).isEqualTo(400);
    assertThat(transactions).hasValue(3);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(stored)).isEqualTo(1);
    assertThat(f.keyRows(refused)).isZero();
  }
}
