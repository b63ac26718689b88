package dev.idem.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.http.client.CallPolicy;
import dev.idem.http.client.CallRetryBudget;
import dev.idem.http.client.IntentKeys;
import dev.idem.http.client.OwnApiCalls;
import dev.idem.http.client.ProviderCalls;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodyHandlers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client of a service's own API over real HTTP on loopback: idem's filter and the payments
 * handler on embedded Tomcat, the client's keys in the database's {@code idem_intent_keys}, every
 * outcome read back from the tables (payments per order, idem_keys per key, intent keys per intent).
 */
class OwnApiCallsTest extends AbstractHttpTest {
  URI payments;
  OwnApiCalls calls;

  @BeforeAll
  void serve() throws Exception {
    payments = f.serve(b -> b);
    calls = OwnApiCalls.of(IntentKeys.database(f.idem), ProviderCalls.of(
        CallPolicy.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build(), CallRetryBudget.standard()));
  }

  HttpRequest payment(String order, String card) {
    return HttpRequest.newBuilder(payments).timeout(Duration.ofSeconds(30)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(HttpFixture.payment(order, 4000, card))).build();
  }

  /** The key stored for {@code intent} in idem_intent_keys, or null. */
  String storedKey(String intent) throws Exception {
    try (Connection c = f.ds.getConnection();
        PreparedStatement s = c.prepareStatement("SELECT idempotency_key FROM idem_intent_keys WHERE intent = ?")) {
      s.setString(1, intent);
      try (ResultSet rs = s.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    }
  }

  long intentRows(String intent) {
    return f.db.count("SELECT count(*) FROM idem_intent_keys WHERE intent = ?", intent);
  }

  @Test
  void theKeyIsStoredBeforeTheFirstSendAndReleasedOnceTheIntentIsDone() throws Exception {
    String order = HttpFixture.unique("stored");
    String intent = order + "/payment";
    CountDownLatch gate = f.gate(order);
    Thread client = new Thread(() -> {
      try {
        calls.send(f.client, intent, payment(order, "block"), BodyHandlers.ofString());
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    client.start();
    assertThat(f.entered.get(order).await(30, TimeUnit.SECONDS)).isTrue();
    String stored = storedKey(intent);
    assertThat(stored).as("stored (committed) while its first request is in the handler").isNotNull();
    assertThat(f.keysSeen.get(order)).containsExactly(stored);
    gate.countDown();
    client.join(30_000);

    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(stored)).isEqualTo(1);
    assertThat(intentRows(intent)).as("released: the intent got 201").isZero();
  }

  @Test
  void a409And503AreRetriedWithTheSameKeyAfterTheirRetryAfter() throws Exception {
    for (int status : new int[] {409, 503}) {
      String order = HttpFixture.unique("first-" + status);
      HttpResponse<String> r = calls.send(f.client, order, payment(order, "first-" + status), BodyHandlers.ofString());

      assertThat(r.statusCode()).isEqualTo(201);
      List<String> keys = f.keysSeen.get(order);
      assertThat(keys).hasSize(2).doesNotContain("null");
      assertThat(keys.get(1)).as("the retry's key").isEqualTo(keys.get(0));
      List<Long> at = f.arrivals.get(order);
      assertThat(Duration.ofNanos(at.get(1) - at.get(0))).as("Retry-After: 1 honoured (back-off is 50 ms at most)")
          .isGreaterThanOrEqualTo(Duration.ofSeconds(1));
      assertThat(f.payments(order)).isEqualTo(1);
      assertThat(f.keyRows(keys.get(0))).isEqualTo(1);
      assertThat(intentRows(order)).isZero();
    }
  }

  @Test
  void aRetryAfterLongerThanTheBoundStopsTheRetriesAndKeepsTheKeyForTheNextSend() throws Exception {
    OwnApiCalls impatient = OwnApiCalls.of(calls.keys(), ProviderCalls.of(
        CallPolicy.builder().maxRetryAfter(Duration.ZERO).build(), CallRetryBudget.standard()));
    String order = HttpFixture.unique("later");
    HttpResponse<String> first = impatient.send(f.client, order, payment(order, "first-503"), BodyHandlers.ofString());

    assertThat(first.statusCode()).isEqualTo(503);
    String kept = storedKey(order);
    assertThat(f.keysSeen.get(order)).containsExactly(kept);
    assertThat(f.payments(order)).isZero();

    HttpResponse<String> next = impatient.send(f.client, order, payment(order, "first-503"), BodyHandlers.ofString());
    assertThat(next.statusCode()).isEqualTo(201);
    assertThat(f.keysSeen.get(order)).containsExactly(kept, kept);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(intentRows(order)).isZero();
  }

  @Test
  void a422IsNotRetriedAndReleasesTheKey() throws Exception {
    String order = HttpFixture.unique("reused");
    calls.keys().keyFor(order);
    String key = storedKey(order);
    // Another client used the intent's key for another request first: the server answers 422.
    assertThat(f.post(payments, HttpFixture.payment(order, 1, "ok"), "Idempotency-Key", key).statusCode()).isEqualTo(201);

    HttpResponse<String> r = calls.send(f.client, order, payment(order, "ok"), BodyHandlers.ofString());

    assertThat(r.statusCode()).isEqualTo(422);
    assertThat(f.runs.get(order).get()).as("the handler ran for the first request only").isEqualTo(1);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(intentRows(order)).as("a 422 is definitive: released").isZero();
  }

  @Test
  void badArgumentsAreRefusedByNameAndNothingIsStoredOrSent() throws Exception {
    HttpRequest keyed = HttpRequest.newBuilder(payments).header("Idempotency-Key", "mine")
        .POST(HttpRequest.BodyPublishers.ofString("{}")).build();
    assertThatThrownBy(() -> calls.send(f.client, "bad-1", keyed, BodyHandlers.ofString()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("already carries Idempotency-Key");
    assertThat(intentRows("bad-1")).isZero();
    assertThatThrownBy(() -> calls.send(f.client, " ", payment("bad-2", "ok"), BodyHandlers.ofString()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("intent must not be empty or blank");
    assertThatThrownBy(() -> calls.send(f.client, "x".repeat(256), payment("bad-3", "ok"), BodyHandlers.ofString()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("intent is 256 characters long");
    assertThatThrownBy(() -> calls.send(null, "bad-4", payment("bad-4", "ok"), BodyHandlers.ofString()))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("client must not be null");
    assertThatThrownBy(() -> OwnApiCalls.of(null, ProviderCalls.withDefaults()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("keys must not be null");
    assertThatThrownBy(() -> IntentKeys.file(Files.createTempFile("idem", ".file")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is a file, not a directory");
    assertThat(f.runs).doesNotContainKeys("bad-1", "bad-2", "bad-3", "bad-4");
    assertThat(f.db.count("SELECT count(*) FROM idem_intent_keys WHERE intent LIKE 'bad-%'")).isZero();
  }

  @Test
  void aFileStoreKeepsTheKeyAcrossInstancesUntilReleased() throws Exception {
    Path dir = Files.createTempDirectory("idem-intent-keys");
    String key = IntentKeys.file(dir).keyFor("order-f1/payment");
    assertThat(IntentKeys.file(dir).keyFor("order-f1/payment")).as("a new instance, as after a restart").isEqualTo(key);
    assertThat(IntentKeys.file(dir).keyFor("order-f2/payment")).isNotEqualTo(key);
    try (var files = Files.list(dir)) {
      assertThat(files.map(p -> p.getFileName().toString())).hasSize(2).allMatch(n -> n.endsWith(".key"));
    }
    IntentKeys.file(dir).release("order-f1/payment");
    assertThat(IntentKeys.file(dir).keyFor("order-f1/payment")).isNotEqualTo(key);
  }

  @Test
  void aClientProcessKilledAfterSendingRetriesWithTheSameKeyWhenStartedAgain() throws Exception {
    String intent = HttpFixture.unique("killed") + "/payment";
    killedAndStartedAgain(intent, "database", () -> storedKey(intent));
    assertThat(intentRows(intent)).as("released by the restarted process").isZero();
  }

  @Test
  void withItsKeysInFilesTooAKilledClientProcessRetriesWithTheSameKey() throws Exception {
    Path dir = Files.createTempDirectory("idem-intent-keys");
    killedAndStartedAgain(HttpFixture.unique("killed-file") + "/payment", dir.toString(), () -> {
      try (var files = Files.list(dir)) {
        List<Path> keys = files.filter(p -> p.toString().endsWith(".key")).toList();
        return keys.isEmpty() ? null : Files.readString(keys.get(0)).strip();
      }
    });
    try (var files = Files.list(dir)) {
      assertThat(files).as("released, and no temporary file left").isEmpty();
    }
  }

  /** What the store holds for the test's one intent (null when released). */
  interface Stored {
    String key() throws Exception;
  }

  /**
   * A child process sends for {@code intent} (the handler holds it), is killed once the server has
   * seen the send, the first request completes, the child starts again, and gets the replay.
   */
  private void killedAndStartedAgain(String intent, String store, Stored stored) throws Exception {
    String order = intent.substring(0, intent.indexOf('/'));
    CountDownLatch gate = f.gate(order);
    Process child = start(intent, order, store);
    String key;
    try {
      assertThat(f.entered.get(order).await(60, TimeUnit.SECONDS)).as("the server saw the child's send").isTrue();
      key = stored.key();
      assertThat(key).as("stored before the send").isNotNull();
      assertThat(f.keysSeen.get(order)).containsExactly(key);
      child.destroyForcibly(); // SIGKILL: the reply is never read
      assertThat(child.waitFor(10, TimeUnit.SECONDS)).isTrue();
    } finally {
      child.destroyForcibly();
    }
    assertThat(child.exitValue()).isEqualTo(137);
    gate.countDown(); // the first request completes on the server, its reply lost
    assertThat(stored.key()).as("the key outlived its process").isEqualTo(key);

    Process again = start(intent, order, store);
    String line;
    try (BufferedReader out = new BufferedReader(new InputStreamReader(again.getInputStream(), StandardCharsets.UTF_8))) {
      line = out.readLine();
      assertThat(again.waitFor(60, TimeUnit.SECONDS)).isTrue();
    } finally {
      again.destroyForcibly();
    }
    assertThat(line).isEqualTo("STATUS 201 replayed=true");
    assertThat(f.runs.get(order).get()).as("the handler ran once").isEqualTo(1);
    assertThat(f.keysSeen.get(order)).as("requests that reached the handler").containsExactly(key);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(stored.key()).as("released by the restarted process").isNull();
  }

  private Process start(String intent, String order, String store) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    return new ProcessBuilder(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.jooq.no-logo=true",
        "-Dorg.jooq.no-tips=true", "-cp", System.getProperty("java.class.path"), OwnApiChild.class.getName(),
        f.db.jdbcUrl(), payments.toString(), intent, order, "block", store)
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
  }
}
