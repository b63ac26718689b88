package dev.idem.http.client;

import static dev.idem.http.client.ChargeProvider.CHARGE_THEN_DROP;
import static dev.idem.http.client.ChargeProvider.DROP;
import static dev.idem.http.client.ChargeProvider.HANG;
import static dev.idem.http.client.ChargeProvider.chargeThen;
import static dev.idem.http.client.ChargeProvider.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodyHandlers;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@link ProviderCalls} against a real HTTP provider on loopback that dedupes by the header. */
class ProviderCallsTest {
  static final HttpClient HTTP = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(5))
      .build();
  /** Short back-off, so the tests run fast; a budget that never gets in the way. */
  static final CallPolicy FAST = CallPolicy.builder().backoff(Duration.ofMillis(1), Duration.ofMillis(5)).build();

  ChargeProvider provider;

  @BeforeEach
  void start() throws IOException {
    provider = new ChargeProvider();
  }

  @AfterEach
  void stop() {
    provider.close();
  }

  static IdempotencyKey callKey() {
    return Keys.child(IdempotencyKey.of("shop-42", UUID.randomUUID().toString()), "external");
  }

  static ProviderCalls calls(CallPolicy policy) {
    return ProviderCalls.of(policy, CallRetryBudget.of(1.0, 100, Duration.ofMinutes(1)));
  }

  HttpRequest charge() {
    return HttpRequest.newBuilder(provider.uri()).POST(HttpRequest.BodyPublishers.ofString("amount=4000")).build();
  }

  @Test
  void everyAttemptCarriesTheSameKeyAndTheProviderChargesOnce() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(status(503, null), status(502, null), DROP);
    HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(provider.received).hasSize(4).allSatisfy(q -> assertThat(q.keys()).containsExactly(key.value()));
    assertThat(provider.charges).containsOnlyKeys(key.value());
    assertThat(r.body()).isEqualTo(provider.charges.get(key.value()));
  }

  @Test
  void unavailableThenOkIsTwoRequestsAndOneCharge() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(status(503, null));
    ProviderCalls calls = calls(FAST);
    HttpResponse<String> r = calls.send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(provider.requestsWith(key.value())).hasSize(2);
    assertThat(provider.charges).hasSize(1);
    assertThat(calls.budget().firstAttempts()).isEqualTo(1);
    assertThat(calls.budget().retries()).isEqualTo(1);
  }

  @Test
  void aReplyLostAsA500AfterTheChargeIsRetriedAndGetsTheStoredAnswer() throws Exception {
    assertALostReplyIsRetriedToTheStoredAnswer(chargeThen(500));
  }

  @Test
  void aReplyLostWithTheConnectionIsRetriedAndGetsTheStoredAnswer() throws Exception {
    assertALostReplyIsRetriedToTheStoredAnswer(CHARGE_THEN_DROP);
  }

  /** The provider charges and the reply is lost as {@code lost} says; the retry gets the stored answer, one charge. */
  private void assertALostReplyIsRetriedToTheStoredAnswer(ChargeProvider.Answer lost) throws Exception {
    IdempotencyKey key = callKey();
    provider.then(lost);
    HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(r.body()).isEqualTo(provider.charges.get(key.value()));
    assertThat(provider.requestsWith(key.value())).hasSize(2);
    assertThat(provider.charges).hasSize(1);
  }

  @Test
  void aConflictWhileTheFirstRequestRunsIsRetriedWithTheSameKey() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(status(409, null));
    HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(provider.requestsWith(key.value())).hasSize(2);
  }

  @Test
  void retryAfterInSecondsIsWaitedOut() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(status(503, "1"));
    HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    List<ChargeProvider.Received> got = provider.requestsWith(key.value());
    assertThat(got).hasSize(2);
    // The first request arrived before its answer left, so this gap is at least the wait.
    assertThat(Duration.ofNanos(got.get(1).nanos() - got.get(0).nanos())).isGreaterThanOrEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void retryAfterAsAnHttpDateIsWaitedOut() throws Exception {
    IdempotencyKey key = callKey();
    AtomicReference<Instant> asked = new AtomicReference<>();
    provider.then((p, ex, k) -> {
      // At least one second ahead (the form has whole seconds); a 5 ms back-off would come sooner.
      Instant at = Instant.now().plusSeconds(2).truncatedTo(ChronoUnit.SECONDS);
      asked.set(at);
      p.respond(ex, 503, DateTimeFormatter.RFC_1123_DATE_TIME.format(at.atOffset(ZoneOffset.UTC)), "busy");
    });
    HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    List<ChargeProvider.Received> got = provider.requestsWith(key.value());
    assertThat(got).hasSize(2);
    assertThat(got.get(1).at()).isAfterOrEqualTo(asked.get());
  }

  @Test
  void aRetryAfterLongerThanTheCapStopsAndTheAnswerIsHandedBack() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(status(503, "120"));
    ProviderCalls calls = calls(CallPolicy.builder().maxRetryAfter(Duration.ofSeconds(5)).build());
    HttpResponse<String> r = calls.send(HTTP, charge(), key, BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.headers().firstValue("Retry-After")).hasValue("120");
    assertThat(provider.received).hasSize(1);
    assertThat(calls.budget().retries()).isZero();
  }

  @Test
  void aClientErrorIsNotRetried() throws Exception {
    for (int status : new int[] {400, 401, 402, 404, 422}) {
      IdempotencyKey key = callKey();
      provider.then(status(status, "1"));
      HttpResponse<String> r = calls(FAST).send(HTTP, charge(), key, BodyHandlers.ofString());
      assertThat(r.statusCode()).isEqualTo(status);
      assertThat(provider.requestsWith(key.value())).as("requests answered %d", status).hasSize(1);
    }
    assertThat(provider.charges).isEmpty();
  }

  @Test
  void maxAttemptsBoundsTheAttemptsAndTheLastAnswerIsHandedBack() throws Exception {
    IdempotencyKey key = callKey();
    provider.otherwise = status(503, null);
    HttpResponse<String> r = calls(FAST.toBuilder().maxAttempts(3).build()).send(HTTP, charge(), key, BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(provider.requestsWith(key.value())).hasSize(3);
  }

  @Test
  void maxAttemptsWithoutAnyReplyThrowsTheLastFailureWithTheEarlierOnesSuppressed() throws Exception {
    IdempotencyKey key = callKey();
    provider.otherwise = DROP;
    ProviderCalls calls = calls(FAST.toBuilder().maxAttempts(3).build());
    assertThatThrownBy(() -> calls.send(HTTP, charge(), key, BodyHandlers.ofString()))
        .isInstanceOf(IOException.class)
        .satisfies(e -> assertThat(e.getSuppressed()).hasSize(2).allMatch(s -> s instanceof IOException));
    assertThat(provider.requestsWith(key.value())).hasSize(3);
  }

  @Test
  void anAttemptWithoutATimeoutOfItsOwnGetsThePolicysAndIsRetried() throws Exception {
    IdempotencyKey key = callKey();
    provider.then(HANG);
    ProviderCalls calls = calls(FAST.toBuilder().attemptTimeout(Duration.ofMillis(300)).build());
    HttpResponse<String> r = calls.send(HTTP, charge(), key, BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(provider.requestsWith(key.value())).hasSize(2);

    IdempotencyKey other = callKey();
    provider.otherwise = HANG;
    assertThatThrownBy(() -> calls.send(HTTP, charge(), other, BodyHandlers.ofString()))
        .isInstanceOf(HttpTimeoutException.class);
    assertThat(provider.requestsWith(other.value())).hasSize(4);
  }

  @Test
  void aRequestCarryingAnotherKeyIsRefusedBeforeAnythingIsSent() throws Exception {
    IdempotencyKey key = callKey();
    HttpRequest other = HttpRequest.newBuilder(charge(), (n, v) -> true).header("idempotency-key", "made-per-attempt").build();
    assertThatThrownBy(() -> calls(FAST).send(HTTP, other, key, BodyHandlers.ofString()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Idempotency-Key: \"made-per-attempt\"")
        .hasMessageContaining(key.value());
    assertThat(provider.received).isEmpty();

    HttpRequest same = HttpRequest.newBuilder(charge(), (n, v) -> true).header("Idempotency-Key", key.value()).build();
    assertThat(calls(FAST).send(HTTP, same, key, BodyHandlers.ofString()).statusCode()).isEqualTo(200);
    assertThat(provider.received).singleElement().satisfies(q -> assertThat(q.keys()).containsExactly(key.value()));
  }

  @Test
  void theHeaderNameIsTheProvidersOwn() throws Exception {
    try (ChargeProvider paypal = new ChargeProvider("PayPal-Request-Id")) {
      IdempotencyKey key = callKey();
      paypal.then(status(503, null));
      ProviderCalls calls = calls(FAST.toBuilder().header("PayPal-Request-Id").build());
      HttpRequest request = HttpRequest.newBuilder(paypal.uri()).POST(HttpRequest.BodyPublishers.ofString("x")).build();
      assertThat(calls.send(HTTP, request, key, BodyHandlers.ofString()).statusCode()).isEqualTo(200);
      assertThat(paypal.received).hasSize(2).allSatisfy(q -> assertThat(q.keys()).containsExactly(key.value()));
      assertThat(paypal.charges).containsOnlyKeys(key.value());
    }
  }

  @Test
  void anInterruptDuringAWaitEndsTheCallAtOnce() throws Exception {
    IdempotencyKey key = callKey();
    provider.otherwise = status(503, "8");
    ProviderCalls calls = calls(FAST);
    AtomicReference<Throwable> thrown = new AtomicReference<>();
    Thread caller = new Thread(() -> {
      try {
        calls.send(HTTP, charge(), key, BodyHandlers.ofString());
      } catch (Throwable t) {
        thrown.set(t);
      }
    }, "interrupted-caller");
    caller.start();
    assertThat(provider.awaitRequests(1, Duration.ofSeconds(10))).isTrue();
    caller.interrupt();
    // Bounded far below the 8 s asked for (a generous bound: no tight upper timing).
    caller.join(6_000);
    assertThat(caller.isAlive()).isFalse();
    assertThat(thrown.get()).isInstanceOf(InterruptedException.class);
    assertThat(provider.received).hasSize(1);
  }

  /**
   * Many callers against a provider that is down: every call fails, and each would retry 3 times
   * (4x the load) without the budget. With it, the retries the provider sees are at most 10% of
   * the first attempts plus the floor.
   */
  @Test
  void theBudgetCapsRetriesOfManyConcurrentCallersAtTenPercentPlusTheFloor() throws Exception {
    provider.otherwise = status(503, null);
    CallRetryBudget budget = CallRetryBudget.of(0.1, 5, Duration.ofMinutes(1));
    ProviderCalls calls = ProviderCalls.of(FAST, budget);
    int callers = 16;
    int callsEach = 15;
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    try {
      List<Future<Integer>> results = new ArrayList<>();
      for (int c = 0; c < callers; c++) {
        results.add(pool.submit(() -> {
          int unavailable = 0;
          for (int i = 0; i < callsEach; i++) {
            if (calls.send(HTTP, charge(), callKey(), BodyHandlers.discarding()).statusCode() == 503) {
              unavailable++;
            }
          }
          return unavailable;
        }));
      }
      for (Future<Integer> f : results) {
        assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo(callsEach);
      }
    } finally {
      pool.shutdownNow();
    }
    int firsts = callers * callsEach;
    long retriesAtTheProvider = provider.received.size() - firsts;
    assertThat(budget.firstAttempts()).isEqualTo(firsts);
    assertThat(retriesAtTheProvider).isEqualTo(budget.retries())
        .isGreaterThanOrEqualTo(5)
        .isLessThanOrEqualTo((long) (0.1 * firsts) + 5);
    assertThat(budget.refused()).isPositive();
    assertThat(provider.charges).isEmpty();
  }
}
