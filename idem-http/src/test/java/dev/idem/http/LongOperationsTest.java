package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.key.IdempotencyKey;
import dev.idem.testing.Poll;
import dev.idem.window.DedupeWindow;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Long operations over real HTTP and a real database: a handler answers 202 and starts the work
 * with an outbox message in the key's transaction; a worker (the relay's publisher, through an
 * inbox) makes the payment and records the final response in one transaction. Every outcome is
 * read back from the database: key rows, final-response rows, payments.
 */
class LongOperationsTest extends AbstractHttpTest {
  LongOperations operations;
  /** The server whose filter answers the status resources, waiting up to 30 s. */
  URI payments;
  /** A second server on the same database whose status resources wait at most 1 s. */
  URI shortWaits;
  Relay relay;
  Inbox worked;
  /** Set by a test whose worker must fail after recording its final response. */
  final AtomicBoolean failAfterComplete = new AtomicBoolean();

  @BeforeAll
  void serve() throws Exception {
    operations = LongOperations.builder(f.idem, "/operations/").maxWait(Duration.ofSeconds(30)).build();
    f.operations = operations;
    // The in-flight wait covers the accepting transaction (milliseconds) on a loaded machine, not the work.
    payments = f.serve(b -> b.longOperations(operations).inFlightWait(Duration.ofSeconds(20)));
    shortWaits = f.serve(b -> b.longOperations(LongOperations.builder(f.idem, "/operations/").maxWait(Duration.ofSeconds(1)).build()));
    worked = f.idem.inbox("long-payments-worker").build();
    relay = f.idem.relay(this::work).backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build();
  }

  @AfterAll
  void stopRelay() {
    relay.close();
  }

  /** The worker: the payment and the operation's final response, in the inbox's one transaction. */
  void work(OutboxMessage m) throws Exception {
    JsonNode request = HttpFixture.JSON.readTree(m.payload());
    IdempotencyKey operation = IdempotencyKey.of(m.headers().get("operation-scope"), m.headers().get("operation-key"));
    String order = request.get("order").asText();
    worked.receive(m.id().toString(), tx -> {
      long id = tx.dsl().resultQuery("INSERT INTO payments (order_id, amount, outcome) VALUES (?, ?, 'captured') RETURNING id",
          order, request.get("amount").asInt()).fetchOne(0, Long.class);
      operations.complete(operation, 201, Map.of("Content-Type", "application/json", "Location", "/payments/pay_" + id),
          ("{\"id\":\"pay_" + id + "\",\"order\":\"" + order + "\",\"outcome\":\"captured\"}").getBytes(StandardCharsets.UTF_8));
      if (failAfterComplete.get()) {
        throw new IllegalStateException("test: the worker failed after recording the final response");
      }
    });
  }

  HttpResponse<String> get(URI base, String location, String... headers) {
    try {
      HttpRequest.Builder b = HttpRequest.newBuilder(base.resolve(location)).timeout(Duration.ofSeconds(30)).GET();
      for (int i = 0; i < headers.length; i += 2) {
        b.header(headers[i], headers[i + 1]);
      }
      return f.client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  long resultRows(String scope, String key) {
    return f.keyRows(scope, LongOperations.resultKey(IdempotencyKey.of(scope, key)).value());
  }

  long allKeyRows() {
    return f.db.count("SELECT count(*) FROM idem_keys");
  }

  static <T> List<T> all(int n, Supplier<T> call) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      List<CompletableFuture<T>> calls = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        calls.add(CompletableFuture.supplyAsync(call, pool));
      }
      List<T> answers = new ArrayList<>();
      for (CompletableFuture<T> c : calls) {
        answers.add(c.get(60, TimeUnit.SECONDS));
      }
      return answers;
    } finally {
      pool.shutdown();
    }
  }

  @Test
  void twentyCopiesGetTheSame202AndOnceDoneTheSameFinalResponse() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");

    List<HttpResponse<String>> accepted = all(20, () -> post(payments, payment(order, 4000, "long"), key));

    assertThat(accepted).allSatisfy(r -> {
      assertThat(r.statusCode()).isEqualTo(202);
      assertThat(r.headers().firstValue("Location")).hasValue("/operations/" + key);
      assertThat(r.headers().firstValue("Retry-After")).hasValue("1");
      assertThat(r.headers().firstValue("Content-Type")).isEqualTo(accepted.get(0).headers().firstValue("Content-Type"));
      assertThat(r.body()).isEqualTo("{\"order\":\"" + order + "\",\"status\":\"accepted\"}");
    });
    assertThat(accepted).filteredOn(r -> r.headers().firstValue("Idempotent-Replayed").isPresent()).hasSize(19);
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(resultRows("anonymous", key)).isZero();
    assertThat(f.payments(order)).isZero();

    // Not done: the status resource answers the accepted 202, with Retry-After.
    HttpResponse<String> running = get(payments, "/operations/" + key);
    assertThat(running.statusCode()).isEqualTo(202);
    assertThat(running.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(running.body()).isEqualTo(accepted.get(0).body());

    assertThat(relay.runOnce()).isPositive(); // the worker

    List<HttpResponse<String>> done = all(20, () -> get(payments, accepted.get(0).headers().firstValue("Location").orElseThrow()));
    assertThat(done).allSatisfy(r -> {
      assertThat(r.statusCode()).isEqualTo(201);
      assertThat(r.headers().firstValue("Content-Type")).hasValue("application/json");
      assertThat(r.headers().firstValue("Cache-Control")).hasValue("no-store");
      assertThat(r.headers().firstValue("Idempotency-Key-Expires")).isEqualTo(accepted.get(0).headers().firstValue("Idempotency-Key-Expires"));
    });
    assertThat(done).extracting(HttpResponse::body).containsOnly(done.get(0).body());
    assertThat(json(done.get(0)).get("order").asText()).isEqualTo(order);
    assertThat(done.get(0).headers().firstValue("Location")).hasValue("/payments/" + json(done.get(0)).get("id").asText());
    // A copy of the request after it is done still gets the accepted 202, byte for byte.
    HttpResponse<String> late = post(payments, payment(order, 4000, "long"), key);
    assertThat(late.statusCode()).isEqualTo(202);
    assertThat(late.body()).isEqualTo(accepted.get(0).body());

    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(resultRows("anonymous", key)).isEqualTo(1);
    assertThat(f.runs.get(order)).hasValue(1);
  }

  @Test
  void aWaitingCallerGetsTheFinalResponseInOneRequest() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> accepted = post(payments, payment(order, 700, "long"), key);
    assertThat(accepted.statusCode()).isEqualTo(202);
    String location = accepted.headers().firstValue("Location").orElseThrow();

    long sleeping = Poll.threadsWaitingIn(Pauses.class.getName(), "next");
    CompletableFuture<HttpResponse<String>> waiting = CompletableFuture.supplyAsync(() -> get(payments, location, "Prefer", "wait=30"));
    Poll.until("the GET waits for the final response", () -> Poll.threadsWaitingIn(Pauses.class.getName(), "next") > sleeping);
    assertThat(waiting).isNotDone();

    assertThat(relay.runOnce()).isPositive();

    HttpResponse<String> done = waiting.get(30, TimeUnit.SECONDS);
    assertThat(done.statusCode()).isEqualTo(201);
    assertThat(json(done).get("order").asText()).isEqualTo(order);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(resultRows("anonymous", key)).isEqualTo(1);
  }

  @Test
  void aWaitPastTheBoundIsAnswered202WithRetryAfter() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> accepted = post(payments, payment(order, 700, "long"), key);
    String location = accepted.headers().firstValue("Location").orElseThrow();

    // Asks 10 minutes of a server that waits at most 1 s: answered 202 long before the client's 30 s timeout.
    HttpResponse<String> capped = get(shortWaits, location, "Prefer", "respond-async, wait=600");
    HttpResponse<String> none = get(shortWaits, location, "Prefer", "wait=0");

    for (HttpResponse<String> r : List.of(capped, none)) {
      assertThat(r.statusCode()).isEqualTo(202);
      assertThat(r.headers().firstValue("Retry-After")).hasValue("1");
      assertThat(r.headers().firstValue("Location")).hasValue(location);
      assertThat(r.body()).isEqualTo(accepted.body());
    }
    assertThat(f.payments(order)).isZero();
    assertThat(resultRows("anonymous", key)).isZero();
  }

  @Test
  void anotherCallersGetOfTheStatusIs404AndTellsNothing() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> accepted = f.post(payments, payment(order, 900, "long"), "Idempotency-Key", key, "X-Account", "alice");
    String location = accepted.headers().firstValue("Location").orElseThrow();
    HttpResponse<String> unknown = get(payments, "/operations/" + HttpFixture.unique("never"), "X-Account", "bob");

    HttpResponse<String> bobWhileRunning = get(payments, location, "X-Account", "bob");
    relay.runOnce();
    HttpResponse<String> bobWhenDone = get(payments, location, "X-Account", "bob", "Prefer", "wait=5");
    HttpResponse<String> anonymousWhenDone = get(payments, location);
    HttpResponse<String> alice = get(payments, location, "X-Account", "alice");

    assertThat(alice.statusCode()).isEqualTo(201);
    for (HttpResponse<String> r : List.of(bobWhileRunning, bobWhenDone, anonymousWhenDone)) {
      assertThat(r.statusCode()).isEqualTo(404);
      assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/operation-unknown");
      // the same answer as for an operation that never was: nothing of alice's
      assertThat(r.body()).isEqualTo(unknown.body()).doesNotContain(order).doesNotContain("pay_");
      assertThat(r.headers().firstValue("Idempotency-Key-Expires")).isEmpty();
    }
    assertThat(f.keyRows("alice", key)).isEqualTo(1);
    assertThat(resultRows("alice", key)).isEqualTo(1);
    assertThat(f.keyRows("bob", key)).isZero();
    assertThat(resultRows("bob", key)).isZero();
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void badInputGetsAClearAnswerAndChangesNothing() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    String location = post(payments, payment(order, 900, "long"), key).headers().firstValue("Location").orElseThrow();
    String plainKey = HttpFixture.unique("k");
    assertThat(post(payments, payment(HttpFixture.unique("o"), 5, "ok"), plainKey).statusCode()).isEqualTo(201);
    long rows = allKeyRows();

    for (String wait : List.of("wait=-1", "wait=abc", "wait=", "wait=1.5", "wait")) {
      HttpResponse<String> r = get(payments, location, "Prefer", wait);
      assertThat(r.statusCode()).as(wait).isEqualTo(400);
      assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/prefer-wait-malformed");
      assertThat(json(r).get("detail").asText()).contains("wait=");
    }
    for (String unknown : List.of("/operations/" + HttpFixture.unique("never"), "/operations/%20",
        "/operations/" + plainKey)) {
      HttpResponse<String> r = get(payments, unknown);
      assertThat(r.statusCode()).as(unknown).isEqualTo(404);
      assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/operation-unknown");
    }
    assertThat(allKeyRows()).isEqualTo(rows);
    assertThat(resultRows("anonymous", key)).isZero();
    assertThat(f.payments(order)).isZero();

    IdempotencyKey operation = IdempotencyKey.of("anonymous", key);
    assertThatThrownBy(() -> operations.complete(operation, 202, Map.of(), new byte[0]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("status 202");
    assertThatThrownBy(() -> operations.complete(operation, 200, Map.of("X-Bad", "a\r\nb"), new byte[0]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("X-Bad");
    assertThatThrownBy(() -> operations.complete(operation, 200, Map.of("Content-Length", "3"), new byte[0]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Content-Length");
    assertThatThrownBy(() -> operations.complete(null, 200, Map.of(), new byte[0]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("operation");
    assertThat(allKeyRows()).isEqualTo(rows);
  }

  @Test
  void theFinalResponseCommitsWithTheWorkersEffectOrNotAtAll() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    String location = post(payments, payment(order, 300, "long"), key).headers().firstValue("Location").orElseThrow();

    failAfterComplete.set(true);
    try {
      relay.runOnce(); // the worker throws after complete(): its payment and the final response roll back
    } finally {
      failAfterComplete.set(false);
    }
    assertThat(f.payments(order)).isZero();
    assertThat(resultRows("anonymous", key)).isZero();
    assertThat(get(payments, location).statusCode()).isEqualTo(202);

    Poll.until("the relay delivers the message again and the worker completes", () -> {
      relay.runOnce();
      return resultRows("anonymous", key) == 1;
    });
    assertThat(get(payments, location).statusCode()).isEqualTo(201);
    // a second completion changes nothing
    assertThat(operations.complete(IdempotencyKey.of("anonymous", key), 500, Map.of(), new byte[0])).isFalse();
    assertThat(get(payments, location).statusCode()).isEqualTo(201);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(resultRows("anonymous", key)).isEqualTo(1);
  }

  @Test
  void aFilterRefusesLongOperationsThatForgetSoonerThanItsKeys() {
    LongOperations shortLived = LongOperations.builder(f.idem, "/operations/").window(DedupeWindow.of(Duration.ofHours(1))).build();
    assertThatThrownBy(() -> IdempotencyKeyFilter.builder(f.idem).longOperations(shortLived).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("longOperations");
    assertThatThrownBy(() -> IdempotencyKeyFilter.builder(f.idem).longOperations(operations)
        .storePolicy(StorePolicy.DEFAULT.notStoring(202)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("202");
    assertThatThrownBy(() -> LongOperations.builder(f.idem, "operations"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("statusPath");
    assertThatThrownBy(() -> LongOperations.builder(f.idem, "/operations/").maxWait(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxWait");
  }
}
