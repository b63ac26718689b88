package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * idem-client.js in a real headless Chromium, served from idem-http's jar resources as a servlet
 * container would serve it (/idem/idem-client.js), against a service on loopback whose payments run
 * through idem's executor by the request's Idempotency-Key. Every outcome is read from the
 * database: payment rows per order, key rows per key. Skipped where no Chromium is installed.
 */
@IdemTest(sql = "CREATE TABLE browser_payments (order_id varchar(100) NOT NULL)")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class IdemClientJsTest {
  static final Optional<Path> CHROMIUM = Chromium.find();

  final TestDatabase db;
  final IdempotentExecutor payments;
  final Map<String, List<String>> keysSeen = new ConcurrentHashMap<>();
  /** The first request of an order named "hang-..." is applied, then its reply held here: the page goes away first. */
  final CountDownLatch hung = new CountDownLatch(1);
  final ExecutorService threads = Executors.newFixedThreadPool(8);
  HttpServer server;
  Chromium browser;

  IdemClientJsTest(TestDatabase db, Idem idem) {
    this.db = db;
    this.payments = idem.executor().name("executor:browser").build();
  }

  @BeforeAll
  void start() throws Exception {
    Assumptions.assumeTrue(CHROMIUM.isPresent(), "no Chromium on the PATH: apt-get install -y chromium to run this test");
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.setExecutor(threads);
    server.createContext("/page.html", e -> answer(e, 200, "text/html",
        "<!doctype html><title>client</title><script src=\"/idem/idem-client.js\"></script><body>client</body>"));
    server.createContext("/idem/idem-client.js", e -> {
      try (InputStream js = getClass().getClassLoader().getResourceAsStream("META-INF/resources/idem/idem-client.js")) {
        answer(e, 200, "text/javascript", new String(js.readAllBytes(), StandardCharsets.UTF_8));
      }
    });
    server.createContext("/payments/", this::pay);
    server.start();
    URI page = URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/page.html");
    browser = Chromium.open(CHROMIUM.get(), page);
    awaitClientLoaded();
  }

  @AfterAll
  void stop() throws Exception {
    hung.countDown();
    if (browser != null) {
      browser.close();
    }
    if (server != null) {
      server.stop(0);
    }
    threads.shutdownNow();
  }

  /**
   * POST /payments/{order}: the payment row and the key commit in one transaction; a repeat of the
   * key gets the first answer. An order named "flaky-..." gets 503 with Retry-After: 1 first, one
   * named "invalid-..." 422, and the first request of "hang-..." is applied and never answered.
   */
  void pay(HttpExchange e) throws IOException {
    String order = e.getRequestURI().getPath().substring("/payments/".length());
    String key = e.getRequestHeaders().getFirst("Idempotency-Key");
    byte[] body = e.getRequestBody().readAllBytes();
    List<String> seen = keysSeen.computeIfAbsent(order, o -> new CopyOnWriteArrayList<>());
    seen.add(String.valueOf(key));
    if (order.startsWith("invalid-")) {
      answer(e, 422, "text/plain", "invalid");
      return;
    }
    if (order.startsWith("flaky-") && seen.size() == 1) {
      e.getResponseHeaders().add("Retry-After", "1");
      answer(e, 503, "text/plain", "try later");
      return;
    }
    Execution<String> paid = payments.execute(IdempotencyKey.of("browser", key), Fingerprint.of(body), Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO browser_payments (order_id) VALUES (?)", order);
      return "paid " + order;
    });
    if (order.startsWith("hang-") && seen.size() == 1) {
      try {
        hung.await(60, TimeUnit.SECONDS); // applied and committed; the reply never reaches the page
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
      }
      return;
    }
    if (paid.replayed()) {
      e.getResponseHeaders().add("Idempotent-Replayed", "true");
    }
    answer(e, 201, "text/plain", paid.value());
  }

  static void answer(HttpExchange e, int status, String type, String text) throws IOException {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    e.getResponseHeaders().add("Content-Type", type);
    e.sendResponseHeaders(status, bytes.length);
    e.getResponseBody().write(bytes);
    e.close();
  }

  void awaitClientLoaded() throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        // The old document has the marker: until it is gone, the reload has not happened yet.
        if (browser.evaluate("typeof window.beforeReload === 'undefined' && typeof IdemClient === 'object'").asBoolean()) {
          return;
        }
      } catch (IllegalStateException e) {
        // "Inspected target navigated or closed": still loading
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the page never loaded idem-client.js");
      }
      Thread.sleep(50);
    }
  }

  /** Sends a payment for {@code order} under intent order/pay from the page; the promise the page holds. */
  static String sendScript(String order) {
    return "IdemClient.send('" + order + "/pay', '/payments/" + order + "', {method: 'POST',"
        + " headers: {'Content-Type': 'application/json'}, body: JSON.stringify({order: '" + order + "', amount: 4000})})";
  }

  String stored(String order) throws Exception {
    JsonNode v = browser.evaluate("localStorage.getItem('idem-intent:" + order + "/pay')");
    return v.isNull() ? null : v.asText();
  }

  long rows(String order) {
    return db.count("SELECT count(*) FROM browser_payments WHERE order_id = ?", order);
  }

  long keyRows(String key) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = 'browser' AND idem_keys.key = ?", key);
  }

  @Test
  void aPageReloadedAfterSendingRetriesWithTheSameKeyAndPaysOnce() throws Exception {
    String order = "hang-" + System.nanoTime();
    browser.evaluate(sendScript(order) + "; true"); // not awaited: the reply never comes
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (rows(order) == 0) {
      assertThat(System.nanoTime()).as("the payment was applied on the server").isLessThan(deadline);
      Thread.sleep(50);
    }
    String key = stored(order);
    assertThat(keysSeen.get(order)).as("the key was stored before the send").containsExactly(key);

    browser.evaluate("window.beforeReload = true; location.reload(); true"); // the page starts again, the reply lost
    awaitClientLoaded();
    assertThat(stored(order)).as("the key survived the reload").isEqualTo(key);
    JsonNode r = browser.evaluate(sendScript(order)
        + ".then(async r => ({status: r.status, replayed: r.headers.get('Idempotent-Replayed'), body: await r.text()}))");

    assertThat(r.get("status").asInt()).isEqualTo(201);
    assertThat(r.get("replayed").asText()).isEqualTo("true");
    assertThat(r.get("body").asText()).isEqualTo("paid " + order);
    assertThat(keysSeen.get(order)).containsExactly(key, key);
    assertThat(rows(order)).as("one payment").isEqualTo(1);
    assertThat(keyRows(key)).isEqualTo(1);
    assertThat(stored(order)).as("released: the intent is done").isNull();
  }

  @Test
  void a503IsRetriedWithTheSameKeyAfterItsRetryAfter() throws Exception {
    String order = "flaky-" + System.nanoTime();
    JsonNode r = browser.evaluate("(async () => { const t = performance.now(); const r = await " + sendScript(order)
        + "; return {status: r.status, waited: performance.now() - t}; })()");

    assertThat(r.get("status").asInt()).isEqualTo(201);
    assertThat(r.get("waited").asDouble()).as("Retry-After: 1 honoured").isGreaterThanOrEqualTo(1000);
    List<String> keys = keysSeen.get(order);
    assertThat(keys).hasSize(2);
    assertThat(keys.get(1)).isEqualTo(keys.get(0));
    assertThat(rows(order)).isEqualTo(1);
    assertThat(keyRows(keys.get(0))).isEqualTo(1);
    assertThat(stored(order)).isNull();
  }

  @Test
  void a422IsNotRetriedAndReleasesTheKey() throws Exception {
    String order = "invalid-" + System.nanoTime();
    JsonNode r = browser.evaluate(sendScript(order) + ".then(r => r.status)");

    assertThat(r.asInt()).isEqualTo(422);
    assertThat(keysSeen.get(order)).hasSize(1);
    assertThat(rows(order)).isZero();
    assertThat(stored(order)).isNull();
  }

  @Test
  void badArgumentsAreRefusedBeforeAnythingIsStoredOrSent() throws Exception {
    JsonNode r = browser.evaluate("Promise.all(["
        + "IdemClient.send(' ', '/payments/bad-1', {method: 'POST'}).catch(e => e.message),"
        + "IdemClient.send('bad-2/pay', '/payments/bad-2', {method: 'POST', headers: {'Idempotency-Key': 'mine'}})"
        + ".catch(e => e.message)])");

    assertThat(r.get(0).asText()).startsWith("intent must be a non-blank string");
    assertThat(r.get(1).asText()).startsWith("init.headers already carries Idempotency-Key");
    assertThat(keysSeen).doesNotContainKeys("bad-1", "bad-2");
    assertThat(stored("bad-2")).isNull();
  }
  @Test
  void inNodeWithAStoreOfItsOwnTheSameRulesHold() throws Exception {
    Optional<Path> node = Stream.of(System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator))
        .map(dir -> Path.of(dir, "node")).filter(Files::isExecutable).findFirst();
    Assumptions.assumeTrue(node.isPresent(), "no node on the PATH: the module is not tested in Node");
    Path dir = Files.createTempDirectory("idem-client-node");
    try (InputStream js = getClass().getClassLoader().getResourceAsStream("META-INF/resources/idem/idem-client.js")) {
      Files.write(dir.resolve("idem-client.js"), js.readAllBytes());
    }
    String order = "flaky-node-" + System.nanoTime();
    Files.writeString(dir.resolve("send.js"), "const IdemClient = require('./idem-client.js');\n"
        + "IdemClient.send('" + order + "/pay', 'http://127.0.0.1:" + server.getAddress().getPort() + "/payments/" + order + "',"
        + " {method: 'POST', body: '{}'}, {keys: IdemClient.memoryKeys()})"
        + ".then(r => console.log('STATUS ' + r.status), e => { console.log('FAILED ' + e); process.exit(1); });\n");
    Process p = new ProcessBuilder(node.get().toString(), "send.js").directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();

    assertThat(out).isEqualTo("STATUS 201");
    List<String> keys = keysSeen.get(order);
    assertThat(keys).hasSize(2);
    assertThat(keys.get(1)).isEqualTo(keys.get(0));
    assertThat(rows(order)).isEqualTo(1);
    assertThat(keyRows(keys.get(0))).isEqualTo(1);
  }
}
