package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.Race;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The filter over real HTTP on loopback (embedded Tomcat) and a real database (PostgreSQL or
 * MariaDB): every test checks the answer and counts the rows in {@code payments} and in idem's key
 * table.
 */
class IdempotencyKeyFilterTest extends AbstractHttpTest {
  URI payments;

  @BeforeAll
  void serve() throws Exception {
    payments = f.serve(b -> b);
  }

  // --- the filter's own refusals ---------------------------------------------------------------

  @Test
  void aGuardedRequestWithoutAKeyIs400ProblemAndNothingRuns() throws Exception {
    String order = HttpFixture.unique("o");
    HttpResponse<String> r = f.post(payments, payment(order, 4000, "ok"));

    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(json(r).get("status").asInt()).isEqualTo(400);
    assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/idempotency-key-missing");
    assertThat(json(r).get("title").asText()).isEqualTo("Idempotency-Key is missing");
    assertThat(json(r).get("detail").asText()).isNotBlank();
    assertThat(r.body()).doesNotContain("Exception").doesNotContain("at dev.");
    assertThat(f.payments(order)).isZero();
    assertThat(f.runs).doesNotContainKey(order);
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "\"unterminated", "\"has a space\"", "\"bad\\escape\"", "\"one\", \"two\"", "\"key\";param=1",
      "a,b", "\"\"", "   "})
  void aMalformedKeyIs400ProblemAndNothingRuns(String field) throws Exception {
    String order = HttpFixture.unique("o");
    long keysBefore = f.db.count("SELECT count(*) FROM idem_keys");
    HttpResponse<String> r = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", field);

    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(json(r).get("title").asText()).isEqualTo("Idempotency key is malformed");
    assertThat(json(r).get("detail").asText()).startsWith("Idempotency-Key");
    assertThat(f.payments(order)).isZero();
    assertThat(f.db.count("SELECT count(*) FROM idem_keys")).isEqualTo(keysBefore);
  }

  @Test
  void twoKeyHeaderLinesAre400() throws Exception {
    String order = HttpFixture.unique("o");
    HttpResponse<String> r = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", "\"k1\"",
        "Idempotency-Key", "\"k2\"");

    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(json(r).get("detail").asText()).contains("sent 2 times");
    assertThat(f.payments(order)).isZero();
    assertThat(f.keyRows("k1") + f.keyRows("k2")).isZero();
  }

  @Test
  void aBodyOverTheLimitIs413AndNothingIsStored() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    String padding = "x".repeat(1024 * 1024);
    HttpResponse<String> r = f.post(payments,
        "{\"order\":\"" + order + "\",\"amount\":1,\"card\":\"ok\",\"pad\":\"" + padding + "\"}", "Idempotency-Key", key);

    assertThat(r.statusCode()).isEqualTo(413);
    assertThat(json(r).get("status").asInt()).isEqualTo(413);
    assertThat(f.payments(order)).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  // --- first answer and replays ----------------------------------------------------------------

  @Test
  void aRepeatGetsTheFirstStatusHeadersAndBodyMarkedReplayedAndRunsNothing() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", "\"" + key + "\"");
    HttpResponse<String> repeat = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", "\"" + key + "\"");

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(first.headers().firstValue("X-Run")).hasValue("1"); // the first answer carries every header
    assertThat(repeat.statusCode()).isEqualTo(201);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Location")).isEqualTo(first.headers().firstValue("Location")).isPresent();
    assertThat(repeat.headers().firstValue("Content-Type")).isEqualTo(first.headers().firstValue("Content-Type"));
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(repeat.headers().firstValue("X-Run")).isEmpty(); // not in the replayed list
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void aStructuredFieldStringWithEscapesAndTheSameKeyBareAreOneKey() throws Exception {
    String order = HttpFixture.unique("o");
    String key = "k\"q\\" + UUID.randomUUID(); // a quote and a backslash, escaped in the sf-string
    String sfString = "\"" + key.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    HttpResponse<String> quoted = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", sfString);
    String bareKey = HttpFixture.unique("bare");
    HttpResponse<String> bare = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", bareKey);
    HttpResponse<String> bareAgainQuoted = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key",
        "\"" + bareKey + "\"");

    assertThat(quoted.statusCode()).isEqualTo(201);
    assertThat(f.keyRows(key)).isEqualTo(1); // stored unescaped
    assertThat(bare.statusCode()).isEqualTo(201);
    assertThat(bareAgainQuoted.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(bareAgainQuoted.body()).isEqualTo(bare.body());
    assertThat(f.payments(order)).isEqualTo(2); // two keys, two intents
  }

  @Test
  void aStoredDeclineIsReplayedAsA402() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(payments, payment(order, 4000, "declined"), "Idempotency-Key", key);
    HttpResponse<String> repeat = f.post(payments, payment(order, 4000, "declined"), "Idempotency-Key", key);

    assertThat(first.statusCode()).isEqualTo(402);
    assertThat(repeat.statusCode()).isEqualTo(402);
    assertThat(repeat.body()).isEqualTo(first.body()).contains("declined");
    assertThat(repeat.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(f.db.count("SELECT count(*) FROM payments WHERE order_id = ? AND outcome = 'declined'", order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void theSameKeyWithAnotherBodyIs422AndTheFirstStaysReplayable() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> other = f.post(payments, payment(order, 5000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> repeat = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key);

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(other.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(json(other).get("title").asText()).isEqualTo("Idempotency-Key is already used");
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.db.count("SELECT count(*) FROM payments WHERE order_id = ? AND amount = 5000", order)).isZero();
    assertThat(f.runs.get(order)).hasValue(1);
  }

  @Test
  void theSameKeyOnAnotherRouteIs422() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> otherRoute = f.post(URI.create(payments + "?express=true"), payment(order, 4000, "ok"),
        "Idempotency-Key", key);

    assertThat(otherRoute.statusCode()).isEqualTo(422);
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void jsonMemberOrderWhitespaceAndNumberSpellingDoNotMakeAnotherRequest() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> reordered = f.post(payments,
        "{ \"card\" : \"ok\",\n  \"amount\": 4000.0, \"order\": \"" + order + "\" }", "Idempotency-Key", key);

    assertThat(reordered.statusCode()).isEqualTo(201);
    assertThat(reordered.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(reordered.body()).isEqualTo(first.body());
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void twoClientsSendingOneKeyValueHaveTwoKeys() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> a = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "acct_a");
    HttpResponse<String> b = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "acct_b");

    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(b.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(b.body()).isNotEqualTo(a.body());
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.keyRows("acct_a", key)).isEqualTo(1);
    assertThat(f.keyRows("acct_b", key)).isEqualTo(1);
  }

  @Test
  void aGetIsNotGuarded() throws Exception {
    HttpResponse<String> r = f.client.send(HttpRequest.newBuilder(payments).GET().build(),
        HttpResponse.BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("payments");
  }

  // --- what is not stored ----------------------------------------------------------------------

  @ParameterizedTest
  @ValueSource(strings = {"status-400", "status-404", "status-409", "status-422", "status-429", "status-500",
      "status-503", "error-400", "error-500"})
  void aStatusThatIsNotStoredRollsBackTheHandlersWritesAndFreesTheKey(String card) throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    int status = Integer.parseInt(card.substring(card.indexOf('-') + 1));
    HttpResponse<String> r = f.post(payments, payment(order, 4000, card), "Idempotency-Key", key);

    assertThat(r.statusCode()).isEqualTo(status); // still sent to the client
    assertThat(r.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(f.runs.get(order)).hasValue(1); // the handler ran and wrote its row...
    assertThat(f.payments(order)).isZero(); // ...which was rolled back with the key
    assertThat(f.keyRows(key)).isZero();

    HttpResponse<String> again = f.post(payments, payment(order, 4000, card), "Idempotency-Key", key);
    assertThat(again.statusCode()).isEqualTo(status);
    assertThat(again.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(f.runs.get(order)).hasValue(2); // not replayed: the handler ran again
    assertThat(f.payments(order)).isZero();
  }

  @Test
  void aHandlerExceptionLeavesNoPaymentAndNoKeyAndARetryRuns() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> failed = f.post(payments, payment(order, 4000, "throw"), "Idempotency-Key", key);

    assertThat(failed.statusCode()).isEqualTo(500); // the container's answer to the exception
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.payments(order)).isZero();
    assertThat(f.keyRows(key)).isZero();

    HttpResponse<String> retry = f.post(payments, payment(order, 4000, "ok"), "Idempotency-Key", key);
    assertThat(retry.statusCode()).isEqualTo(201);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void aRunTheExecutorRepeatsAfterASerializationFailureSendsOnlyTheLastRunsAnswer() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> r = f.post(payments, payment(order, 4000, "serialization"), "Idempotency-Key", key);

    assertThat(r.statusCode()).isEqualTo(201);
    assertThat(r.body()).doesNotContain("partial").contains("pay_");
    assertThat(r.headers().firstValue("X-Run")).hasValue("2");
    assertThat(f.runs.get(order)).hasValue(2);
    assertThat(f.payments(order)).isEqualTo(1); // the first run's row was rolled back
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  // --- in flight -------------------------------------------------------------------------------

  @Test
  void aCopyWhileTheFirstRunsIs409WithRetryAfterAndGetsTheReplayOnceItCommits() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> post(payment(order, 4000, "block"), key));
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> copy = f.post(payments, payment(order, 4000, "block"), "Idempotency-Key", key);
    assertThat(copy.statusCode()).isEqualTo(409);
    assertThat(copy.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(copy.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(json(copy).get("status").asInt()).isEqualTo(409);
    assertThat(f.keyRows(key)).isZero(); // the first's claim is not committed yet

    gate.countDown();
    assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
    HttpResponse<String> later = f.post(payments, payment(order, 4000, "block"), "Idempotency-Key", key);
    assertThat(later.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(later.body()).isEqualTo(first.get().body());
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.runs.get(order)).hasValue(1);
  }

  @Test
  void anotherRequestUnderAKeyInFlightIs422Not409() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> post(payment(order, 4000, "block"), key));
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> other = f.post(payments, payment(order, 9900, "block"), "Idempotency-Key", key);
    gate.countDown();

    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.db.count("SELECT count(*) FROM payments WHERE order_id = ? AND amount = 9900", order)).isZero();
  }

  @Test
  void concurrentCopiesOfOneKeyCommitOnePaymentAndEveryOtherCopyIsAReplayOrA409() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    List<HttpResponse<String>> answers = Race.together(8, i -> post(payment(order, 4000, "ok"), key));

    List<HttpResponse<String>> applied = answers.stream()
        .filter(r -> r.statusCode() == 201 && r.headers().firstValue("Idempotent-Replayed").isEmpty()).toList();
    assertThat(applied).hasSize(1);
    assertThat(answers).allSatisfy(r -> {
      boolean replay = r.statusCode() == 201 && r.headers().firstValue("Idempotent-Replayed").isPresent()
          && r.body().equals(applied.get(0).body());
      assertThat(r == applied.get(0) || replay || r.statusCode() == 409)
          .as("answer %s %s", r.statusCode(), r.body()).isTrue();
    });
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  private HttpResponse<String> post(String body, String key) {
    return post(payments, body, key);
  }
}
