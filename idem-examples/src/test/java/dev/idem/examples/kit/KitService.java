package dev.idem.examples.kit;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.sequence.EntitySequences;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.sql.DataSource;

/**
 * A tiny payments service for the kit's tests, on a real port and a real database, every
 * connection taken from a {@link FaultyDataSource}: the defects the kit must catch and their
 * guarded versions, side by side.
 *
 * <ul>
 *   <li>{@code POST /unguarded}: inserts a payment for the form's {@code order}, ignoring the key;
 *   <li>{@code POST /guarded}: the same insert through idem's executor under the request's {@code
 *       Idempotency-Key}, the row written in the executor's transaction;
 *   <li>{@link #chargeOutsideIdem}: an inbox handler that writes its charge on a connection of its
 *       own, in auto-commit, outside the inbox's transaction (the defect);
 *   <li>{@link #charge}: the inbox handler writing on the inbox's transaction;
 *   <li>{@link #applyPrice}, {@link #setPriceBlindly} and {@link #recordPriceBlindly}: a price
 *       event applied through idem's per-entity sequences, and written blind (over the price, or
 *       as one more event row).
 * </ul>
 */
final class KitService implements AutoCloseable {
  /** The service's tables on PostgreSQL. */
  private static final String POSTGRESQL_TABLES = "CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL);"
      + "CREATE TABLE charges (id bigserial PRIMARY KEY, order_id text NOT NULL);"
      + "CREATE TABLE price_events (sku text NOT NULL, seq bigint NOT NULL);"
      + "CREATE TABLE prices (sku text PRIMARY KEY, seq bigint NOT NULL)";

  /** The same on MariaDB: orders and skus compared exactly, as PostgreSQL compares text (utf8mb4_nopad_bin: no case folded, no padding). */
  private static final String MARIADB_TABLES = "CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
      + " order_id VARCHAR(255) NOT NULL, amount INT NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;"
      + "CREATE TABLE charges (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL)"
      + " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;"
      + "CREATE TABLE price_events (sku VARCHAR(255) NOT NULL, seq BIGINT NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;"
      + "CREATE TABLE prices (sku VARCHAR(255) PRIMARY KEY, seq BIGINT NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin";

  /** Makes the service's tables in {@code db}, the test class's database: its test classes call it before their first test. */
  static void createTables(TestDatabase db) {
    db.execute(mariadb(db) ? MARIADB_TABLES : POSTGRESQL_TABLES);
  }

  static boolean mariadb(TestDatabase db) {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  final TestDatabase db;
  /** The pool: the kit reads effects through it. */
  final DataSource pool;
  /** What the service runs on. */
  final FaultyDataSource faulty;
  final Idem idem;
  private final IdempotentExecutor executor;
  private final Inbox charges;
  private final EntitySequences prices;
  private final HttpServer server;
  private final ExecutorService requests;

  /**
   * @param db the test class's database, with the service's tables ({@link #createTables})
   * @param pool a pool on it, which the kit reads effects through
   * @param faulty that pool wrapped: what the service runs on
   * @param answersFromMemory the {@code Idem}'s {@code answersFromMemory}: zero for a test of the
   *     window, which ages idem's rows by hand
   */
  KitService(TestDatabase db, DataSource pool, FaultyDataSource faulty, Duration answersFromMemory) throws IOException {
    this.db = db;
    this.pool = pool;
    this.faulty = faulty;
    idem = Idem.builder(faulty).answersFromMemory(answersFromMemory).build();
    executor = idem.executor().name("payments").build();
    charges = idem.inbox("charges").build();
    prices = idem.sequences("prices");
    requests = Executors.newFixedThreadPool(32);
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/unguarded", answering(this::unguarded));
    server.createContext("/guarded", answering(this::guarded));
    server.setExecutor(requests);
    server.start();
  }

  URI uri(String path) {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
  }

  /** Rows in {@code table} for {@code order}, read from the database. */
  long rows(String table, String column, String value) {
    return db.count("SELECT count(*) FROM " + table + " WHERE " + column + " = ?", value);
  }

  /** What a request gets: a status and a body. */
  private record Answer(int status, String body, Map<String, String> headers) {}

  @FunctionalInterface
  private interface Route {
    Answer handle(Map<String, String> form, String key) throws Exception;
  }

  /** Anything the route throws is a 500, as a servlet container answers it. */
  private static HttpHandler answering(Route route) {
    return exchange -> {
      try (exchange) {
        Answer a;
        try {
          a = route.handle(form(exchange), exchange.getRequestHeaders().getFirst("Idempotency-Key"));
        } catch (Exception e) {
          a = new Answer(500, String.valueOf(e), Map.of());
        }
        byte[] body = a.body().getBytes(StandardCharsets.UTF_8);
        a.headers().forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
        exchange.sendResponseHeaders(a.status(), body.length == 0 ? -1 : body.length);
        if (body.length > 0) {
          exchange.getResponseBody().write(body);
        }
      }
    };
  }

  private static Map<String, String> form(HttpExchange exchange) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      String text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      java.util.LinkedHashMap<String, String> form = new java.util.LinkedHashMap<>();
      for (String pair : text.split("&")) {
        int eq = pair.indexOf('=');
        if (eq > 0) {
          form.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
              URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
        }
      }
      return form;
    }
  }

  /** The defect: every request that arrives inserts a payment. */
  private Answer unguarded(Map<String, String> form, String key) throws Exception {
    try (Connection c = faulty.getConnection()) {
      c.setAutoCommit(false);
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO payments (order_id, amount) VALUES (?, 4000)")) {
        ps.setString(1, form.get("order"));
        ps.executeUpdate();
      }
      c.commit();
    }
    return new Answer(201, "", Map.of());
  }

  /** One payment per key: the insert in the executor's transaction, committed with the key. */
  private Answer guarded(Map<String, String> form, String key) {
    if (key == null) {
      return new Answer(400, "Idempotency-Key missing", Map.of());
    }
    String order = form.get("order");
    Execution<String> run;
    try {
      run = executor.execute(IdempotencyKey.of("shop", key), Fingerprint.ofFields(Map.of("order", order)), Codec.utf8(),
          tx -> {
            tx.dsl().execute("INSERT INTO payments (order_id, amount) VALUES (?, 4000)", order);
            return "paid " + order;
          });
    } catch (KeyReuseException e) {
      return new Answer(422, e.getMessage(), Map.of());
    }
    if (run.inFlight()) {
      return new Answer(409, "in flight", Map.of("Retry-After", "1"));
    }
    return new Answer(201, run.value(), run.replayed() ? Map.of("Idempotent-Replayed", "true") : Map.of());
  }

  /**
   * The defect: the charge is written on a connection of the handler's own, in auto-commit, so it
   * commits apart from the inbox's claim of the message id.
   */
  void chargeOutsideIdem(String messageId, String order) throws java.sql.SQLException {
    acknowledge(charges.receive(messageId, tx -> {
      try (Connection own = faulty.getConnection();
          PreparedStatement ps = own.prepareStatement("INSERT INTO charges (order_id) VALUES (?)")) {
        ps.setString(1, order);
        ps.executeUpdate();
      }
    }));
  }

  /** The charge written on the inbox's transaction: it commits with the claim or not at all. */
  void charge(String messageId, String order) {
    acknowledge(charges.receive(messageId, tx -> {
      tx.dsl().execute("INSERT INTO charges (order_id) VALUES (?)", order);
    }));
  }

  /** A copy still running elsewhere is not acknowledged: the broker delivers it again. */
  private static void acknowledge(Execution<Void> e) {
    if (e.inFlight()) {
      throw new IllegalStateException("in flight: not acknowledged");
    }
  }

  /** A price event recorded only if newer than the newest applied for its sku. */
  void applyPrice(String sku, long seq) {
    prices.applyIfNewer(sku, seq, tx -> {
      tx.dsl().execute("INSERT INTO price_events (sku, seq) VALUES (?, ?)", sku, seq);
    });
  }

  /** The defect: the event's number written whatever arrives, in whatever order. */
  void setPriceBlindly(String sku, long seq) throws Exception {
    String upsert = mariadb(db) ? "INSERT INTO prices (sku, seq) VALUES (?, ?) ON DUPLICATE KEY UPDATE seq = VALUES(seq)"
        : "INSERT INTO prices (sku, seq) VALUES (?, ?) ON CONFLICT (sku) DO UPDATE SET seq = excluded.seq";
    try (Connection c = faulty.getConnection(); PreparedStatement ps = c.prepareStatement(upsert)) {
      ps.setString(1, sku);
      ps.setLong(2, seq);
      ps.executeUpdate();
    }
  }

  /** The defect: every event that arrives is recorded, repeats and late ones too. */
  void recordPriceBlindly(String sku, long seq) throws Exception {
    try (Connection c = faulty.getConnection();
        PreparedStatement ps = c.prepareStatement("INSERT INTO price_events (sku, seq) VALUES (?, ?)")) {
      ps.setString(1, sku);
      ps.setLong(2, seq);
      ps.executeUpdate();
    }
  }

  @Override
  public void close() {
    server.stop(0);
    requests.shutdownNow();
  }
}
