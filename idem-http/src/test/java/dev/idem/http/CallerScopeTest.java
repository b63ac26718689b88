package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.event.IdemEvent;
import dev.idem.jdbc.Idem;
import dev.idem.testing.Poll;
import dev.idem.testing.RecordingListener;
import java.net.URI;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Whose key it is, and what copies in one process wait for: over real HTTP and a real database,
 * every answer checked against the rows in {@code payments} and idem's key table.
 */
class CallerScopeTest extends AbstractHttpTest {

  @Test
  void byDefaultARequestWithoutAPrincipalIsRefusedAndNothingRuns() throws Exception {
    URI uri = f.serve(b -> b.scope(ScopeResolver.PRINCIPAL));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> refused = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);

    assertThat(refused.statusCode()).isEqualTo(403);
    assertThat(refused.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    // Said to any client: that the request names no caller, and nothing about the server's settings.
    assertThat(json(refused).get("detail").asText()).contains("does not say which caller it comes from")
        .doesNotContain("scope-header", "scopeHeader", "ScopeResolver", "filter-order", "authenticated");
    assertThat(f.runs.get(order)).isNull();
    assertThat(f.payments(order)).isZero();
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key)).isZero();
  }

  @Test
  void oneKeyFromTwoCallersNamedByAHeaderIsTwoKeysEachWithItsOwnResponse() throws Exception {
    URI uri = f.serve(b -> b.scopeHeader("X-Tenant-Id"));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> a = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Tenant-Id", "tenant-a");
    HttpResponse<String> b = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Tenant-Id", "tenant-b");
    HttpResponse<String> aAgain = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Tenant-Id", "tenant-a");
    HttpResponse<String> none = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);

    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(b.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).isEmpty();
    assertThat(b.body()).isNotEqualTo(a.body()); // its own payment id, not a's
    assertThat(aAgain.body()).isEqualTo(a.body());
    assertThat(aAgain.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(none.statusCode()).isEqualTo(400);
    assertThat(json(none).get("title").asText()).isEqualTo("X-Tenant-Id is missing");
    assertThat(f.runs.get(order)).hasValue(2);
    assertThat(f.payments(order)).isEqualTo(2);
    assertThat(f.keyRows("tenant-a", key)).isEqualTo(1);
    assertThat(f.keyRows("tenant-b", key)).isEqualTo(1);
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key)).isEqualTo(2);
  }

  @Test
  void aSharedScopeIsOneSpaceForEveryCaller() throws Exception {
    URI uri = f.serve(IdempotencyKeyFilter.Builder::sharedScope);
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "a");
    HttpResponse<String> other = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "b");

    assertThat(other.body()).isEqualTo(first.body()); // what the shared space means: b reads a's response
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows("shared", key)).isEqualTo(1);
  }

  @Test
  void aBlankScopeIsNoCallerAndIsRefused() throws Exception {
    URI uri = f.serve(b -> b.scope(r -> r.getHeader("X-Account") == null ? "" : " \t "));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> empty = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key);
    HttpResponse<String> spaces = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "b");

    assertThat(empty.statusCode()).isEqualTo(403);
    assertThat(spaces.statusCode()).isEqualTo(403);
    assertThat(json(spaces).get("title").asText()).isEqualTo("The caller of this request is not known");
    assertThat(f.runs.get(order)).isNull();
    assertThat(f.payments(order)).isZero();
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key)).isZero();
  }

  /**
   * A scope that is not a key part is stored as {@code sha256:<its hash>}; a caller whose own
   * scope is spelled exactly that is still another caller, with its own key and response.
   */
  @Test
  void aScopeSpelledLikeAnotherCallersHashedScopeIsAnotherScope() throws Exception {
    URI uri = f.serve(b -> b); // the fixture's scope: the X-Account header as it is
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    String hashed = "sha256:" + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
        .digest("Jane Doe".getBytes(StandardCharsets.UTF_8)));
    HttpResponse<String> jane = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "Jane Doe");
    HttpResponse<String> other = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", hashed);
    HttpResponse<String> plain = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key, "X-Account", "acct_1");

    assertThat(jane.statusCode()).isEqualTo(201);
    assertThat(other.statusCode()).isEqualTo(201);
    assertThat(other.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).isEmpty();
    assertThat(other.body()).isNotEqualTo(jane.body()); // its own payment, not Jane's
    assertThat(f.runs.get(order)).hasValue(3);
    assertThat(f.payments(order)).isEqualTo(3);
    assertThat(f.keyRows(hashed, key)).isEqualTo(1); // Jane's
    assertThat(f.keyRows("acct_1", key)).isEqualTo(1); // an ordinary scope is kept as it is
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ? AND scope LIKE 'sha256:%'", key)).isEqualTo(2);
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key)).isEqualTo(3);
  }

  @Test
  void aScopeHeaderSentTwiceIsRefused() throws Exception {
    URI uri = f.serve(b -> b.scopeHeader("X-Tenant-Id"));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> twice = f.post(uri, payment(order, 4000, "ok"), "Idempotency-Key", key,
        "X-Tenant-Id", "tenant-a", "X-Tenant-Id", "tenant-b");

    assertThat(twice.statusCode()).isEqualTo(400);
    assertThat(json(twice).get("title").asText()).isEqualTo("X-Tenant-Id was sent 2 times");
    assertThat(f.runs.get(order)).isNull();
    assertThat(f.payments(order)).isZero();
    assertThat(f.db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ?", key)).isZero();
  }

  /**
   * Copies waiting in this process for a held first copy: another body is refused at once and
   * counted as a mismatch; the same body waits and gets the replay once the first commits.
   */
  @Test
  void aCopyWaitsForTheFirstInMemoryAndAnotherBodyIsRefusedAtOnceAsAMismatch() throws Exception {
    RecordingListener recording = new RecordingListener();
    URI uri = f.serve(Idem.builder(f.ds).listener(recording).build(), b -> b.inFlightWait(Duration.ofSeconds(20)));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> post(uri, payment(order, 4000, "block"), key));
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();
    long parked = HttpFixture.parkedCopies();
    CompletableFuture<HttpResponse<String>> copy = CompletableFuture.supplyAsync(() -> post(uri, payment(order, 4000, "block"), key));
    Poll.until("the copy waits on the first", () -> HttpFixture.parkedCopies() - parked == 1);

    HttpResponse<String> other = post(uri, payment(order, 9900, "block"), key);
    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(first).isNotDone(); // refused while the first is still held
    assertThat(recording.of(IdemEvent.FingerprintMismatch.class)).singleElement()
        .satisfies(e -> assertThat(e.key().value()).isEqualTo(key));

    gate.countDown();
    HttpResponse<String> applied = first.get(30, TimeUnit.SECONDS);
    HttpResponse<String> replayed = copy.get(30, TimeUnit.SECONDS);
    assertThat(applied.statusCode()).isEqualTo(201);
    assertThat(replayed.body()).isEqualTo(applied.body());
    assertThat(replayed.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(recording.of(IdemEvent.FingerprintMismatch.class)).hasSize(1);
    assertThat(recording.of(IdemEvent.InFlight.class)).isEmpty(); // the copy waited and was replayed: not in flight
  }
}
