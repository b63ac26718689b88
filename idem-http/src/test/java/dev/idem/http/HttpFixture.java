package dev.idem.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.IdempotencyKey;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import javax.sql.DataSource;
import org.apache.catalina.Context;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.startup.Tomcat;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;

/**
 * Embedded Tomcats on loopback serving {@link PaymentServlet} behind an {@link
 * IdempotencyKeyFilter}, on the database a test class gets from {@code @IdemTest(poolSize = POOL)}
 * (PostgreSQL or MariaDB): idem migrated and a {@code payments} table ({@link #payments(TestDatabase)})
 * standing for the user's effect.
 * Everything the tests assert is read back from the database as well as the HTTP answer.
 */
final class HttpFixture implements AutoCloseable {
  static final ObjectMapper JSON = new ObjectMapper();
  /** The user's table, with an id the database fills in, in {@code db}'s SQL. */
  static String payments(TestDatabase db) {
    return "CREATE TABLE payments (" + (mariadb(db) ? "id BIGINT AUTO_INCREMENT PRIMARY KEY" : "id bigserial PRIMARY KEY")
        + ", order_id text NOT NULL, amount int NOT NULL, outcome text NOT NULL)";
  }

  static boolean mariadb(TestDatabase db) {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }
  /** The pool, for {@link IdemTest#poolSize()}: room for the copies the tests race and their servers. */
  static final int POOL = 24;

  final TestDatabase db;
  final DataSource ds;
  final Idem idem;
  final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  /** Handlers that block: an order's latch, released by the test; and a latch counted down on entry. */
  final Map<String, CountDownLatch> gates = new ConcurrentHashMap<>();
  final Map<String, CountDownLatch> entered = new ConcurrentHashMap<>();
  /** How many times the handler ran, per order (every attempt, rolled back or not). */
  final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
  /** The Idempotency-Key of every request that reached the handler, per order, in order of arrival. */
  final Map<String, List<String>> keysSeen = new ConcurrentHashMap<>();
  /** When each of those arrived, by {@link System#nanoTime()}. */
  final Map<String, List<Long>> arrivals = new ConcurrentHashMap<>();
  /**
   * Slow clients: a request with {@code X-Slow-Client: <order>} gets its answer written only once
   * that order's latch here opens (standing for a client that does not read); {@link #answering}
   * counts down when the filter starts writing it.
   */
  final Map<String, CountDownLatch> slowClients = new ConcurrentHashMap<>();
  final Map<String, CountDownLatch> answering = new ConcurrentHashMap<>();
  private final List<Tomcat> servers = new ArrayList<>();
  /** The long operations the servers' filters were built with (set by a test that serves them), for the "long" card. */
  volatile LongOperations operations;

  /** On the test class's database, pool and Idem, as {@link IdemTest} injects them. */
  HttpFixture(TestDatabase db, DataSource ds, Idem idem) {
    this.db = db;
    this.ds = ds;
    this.idem = idem;
  }

  /** A server on a free loopback port with the filter {@code configure} makes; its base URI. */
  URI serve(UnaryOperator<IdempotencyKeyFilter.Builder> configure) throws IOException, LifecycleException {
    return serve(idem, configure);
  }

  /** As {@link #serve(UnaryOperator)}, with a filter on {@code idem} (e.g. one with a listener). */
  URI serve(Idem idem, UnaryOperator<IdempotencyKeyFilter.Builder> configure) throws IOException, LifecycleException {
    IdempotencyKeyFilter filter = configure.apply(IdempotencyKeyFilter.builder(idem)
        // Tests act as several API clients: the client's account comes in a header; the tests' own resolver
        // puts requests without one in an account of their own, "anonymous" (the filter itself has no such fallback).
        .scope(r -> r.getHeader("X-Account") == null ? "anonymous" : r.getHeader("X-Account"))).build();
    Tomcat tomcat = new Tomcat();
    tomcat.setBaseDir(Files.createTempDirectory("idem-http-tomcat").toString());
    tomcat.setPort(0);
    tomcat.getConnector();
    Context context = tomcat.addContext("", null);
    Tomcat.addServlet(context, "payments", new PaymentServlet());
    context.addServletMappingDecoded("/payments", "payments");
    // The default servlet too: Tomcat runs filters only for a request some servlet is mapped to, and
    // the filter answers the status resources of long operations (/operations/...) itself.
    context.addServletMappingDecoded("/", "payments");
    FilterDef slow = new FilterDef();
    slow.setFilterName("slow-client");
    slow.setFilter(new SlowClient());
    context.addFilterDef(slow);
    FilterMap slowMap = new FilterMap();
    slowMap.setFilterName("slow-client");
    slowMap.addURLPattern("/*");
    context.addFilterMap(slowMap);
    FilterDef def = new FilterDef();
    def.setFilterName("idempotency");
    def.setFilter(filter);
    context.addFilterDef(def);
    FilterMap map = new FilterMap();
    map.setFilterName("idempotency");
    map.addURLPattern("/*");
    context.addFilterMap(map);
    tomcat.start();
    servers.add(tomcat);
    return URI.create("http://127.0.0.1:" + localPort(tomcat) + "/payments");
  }

  /** A server on a free loopback port with {@code servlet} alone at {@code path}, no filter; its URI. */
  URI serveServlet(String path, HttpServlet servlet) throws IOException, LifecycleException {
    Tomcat tomcat = new Tomcat();
    tomcat.setBaseDir(Files.createTempDirectory("idem-http-tomcat").toString());
    tomcat.setPort(0);
    tomcat.getConnector();
    Context context = tomcat.addContext("", null);
    Tomcat.addServlet(context, "servlet", servlet);
    context.addServletMappingDecoded(path, "servlet");
    tomcat.start();
    servers.add(tomcat);
    return URI.create("http://127.0.0.1:" + localPort(tomcat) + path);
  }

  /**
   * The port the connector bound. By reflection: the tests compile inside module dev.idem.http,
   * which does not read java.management, and Tomcat's Connector is an MBean.
   */
  private static int localPort(Tomcat tomcat) {
    Object connector = tomcat.getConnector();
    try {
      return (Integer) connector.getClass().getMethod("getLocalPort").invoke(connector);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("could not read Tomcat's port", e);
    }
  }

  /** A payment request body. */
  static String payment(String order, int amount, String card) {
    return "{\"order\":\"" + order + "\",\"amount\":" + amount + ",\"card\":\"" + card + "\"}";
  }

  /** POST {@code body} to {@code uri} with the header lines given as name, value pairs. */
  HttpResponse<String> post(URI uri, String body, String... headers) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  long keyRows(String scope, String key) {
    // idem_keys.key: MariaDB reserves KEY, and takes it after a table name (as PostgreSQL does)
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?", scope, key);
  }

  long keyRows(String key) {
    return keyRows("anonymous", key);
  }

  static JsonNode json(HttpResponse<String> response) throws IOException {
    return JSON.readTree(response.body());
  }

  /** Request threads parked in the filter's in-memory wait for a running copy of their key. */
  static long parkedCopies() {
    return Poll.threadsWaitingIn(InFlightRequests.class.getName(), "admit");
  }

  /** Makes {@code order}'s client slow (see {@link #slowClients}); returns the latch that lets it read. */
  CountDownLatch slowClient(String order) {
    answering.put(order, new CountDownLatch(1));
    CountDownLatch reads = new CountDownLatch(1);
    slowClients.put(order, reads);
    return reads;
  }

  CountDownLatch gate(String order) {
    entered.put(order, new CountDownLatch(1));
    CountDownLatch gate = new CountDownLatch(1);
    gates.put(order, gate);
    return gate;
  }

  private void awaitGate(String order) {
    try {
      if (!gates.get(order).await(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the test never opened the gate of " + order);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A value no other test uses, for orders and keys. */
  static String unique(String prefix) {
    return prefix + "-" + java.util.UUID.randomUUID();
  }

  /**
   * Lets every held handler and slow client go (a test that failed half-way leaves them waiting),
   * then stops the servers; the database is the test class's, dropped by {@link IdemTest} after it.
   */
  @Override
  public void close() {
    slowClients.values().forEach(CountDownLatch::countDown);
    gates.values().forEach(CountDownLatch::countDown);
    for (Tomcat t : servers) {
      try {
        t.stop();
        t.destroy();
      } catch (LifecycleException e) {
        // the JVM ends soon; a server that will not stop must not hide the test's result
      }
    }
  }

  /**
   * The user's handler: POST {"order", "amount", "card"} writes one payment row through {@code
   * idem.inTransaction} (which joins the key's transaction), then answers by the card: "ok" 201
   * with a JSON body and a Location; "declined" 402; "status-NNN" that status; "error-NNN"
   * sendError(NNN); "throw" an exception; "block" waits on the order's gate, then 201;
   * "serialization" fails the first run with SQLSTATE 40001 after writing part of its answer;
   * "block1-503" and "block1-throw" hold the first run on the gate, then answer 503 or throw;
   * "first-NNN" answers NNN with Retry-After: 1 to the first run only.
   * "long" accepts a long operation ({@link #operations}): 202, and the payment is left to a worker,
   * started by an outbox message on topic "long-payments" enqueued in the key's transaction (its
   * headers name the operation), so the 202 and the work's start commit together.
   */
  final class PaymentServlet extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      resp.setContentType("text/plain");
      resp.getWriter().write("payments");
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      JsonNode body = JSON.readTree(req.getInputStream());
      String order = body.get("order").asText();
      int amount = body.get("amount").asInt();
      String card = body.get("card").asText();
      int run = runs.computeIfAbsent(order, o -> new AtomicInteger()).incrementAndGet();
      arrivals.computeIfAbsent(order, o -> new CopyOnWriteArrayList<>()).add(System.nanoTime());
      keysSeen.computeIfAbsent(order, o -> new CopyOnWriteArrayList<>())
          .add(String.valueOf(req.getHeader("Idempotency-Key")));
      if (card.equals("long")) {
        IdempotencyKey operation = operations.accept(req, resp);
        idem.outbox().enqueue(NewMessage.of("long-payments", JSON.writeValueAsBytes(body))
            .withHeader("operation-scope", operation.scope()).withHeader("operation-key", operation.value()));
        resp.setContentType("application/json");
        resp.getWriter().write("{\"order\":\"" + order + "\",\"status\":\"accepted\"}");
        return;
      }
      String outcome = card.equals("declined") ? "declined" : "captured";
      // Joins the transaction the filter's executor opened for the key: commits with it, or not at all.
      long id = idem.inTransaction(tx -> tx.dsl().resultQuery(
          "INSERT INTO payments (order_id, amount, outcome) VALUES (?, ?, ?) RETURNING id", order, amount, outcome)
          .fetchOne(0, Long.class));
      if (card.equals("serialization") && run == 1) {
        resp.setStatus(201);
        resp.getWriter().write("partial answer of a run that rolls back");
        resp.flushBuffer();
        // SQLSTATE 40001: PostgreSQL's serialization failure, MariaDB's deadlock (1213)
        idem.useTransaction(tx -> tx.dsl().execute(mariadb(db)
            ? "SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'test: serialization failure', MYSQL_ERRNO = 1213"
            : "DO $$ BEGIN RAISE EXCEPTION 'test: serialization failure' USING ERRCODE = 'serialization_failure'; END $$"));
      }
      if (card.startsWith("block1-") && run == 1) {
        // The first run is held, then fails: "block1-503" answers 503 (not stored), "block1-throw" throws.
        entered.get(order).countDown();
        awaitGate(order);
        if (card.equals("block1-throw")) {
          throw new IllegalStateException("test: the first run failed after writing its payment row");
        }
        resp.setStatus(503);
        resp.getWriter().write("the first run failed");
        return;
      }
      if (card.startsWith("first-") && run == 1) {
        // "first-NNN": the first run answers NNN with Retry-After: 1 (not stored: its payment row
        // rolls back), later runs as "ok".
        resp.setStatus(Integer.parseInt(card.substring("first-".length())));
        resp.setHeader("Retry-After", "1");
        return;
      }
      if (card.equals("block")) {
        entered.get(order).countDown();
        awaitGate(order);
      }
      if (card.equals("throw")) {
        throw new IllegalStateException("test: the handler failed after writing its payment row");
      }
      if (card.startsWith("error-")) {
        resp.sendError(Integer.parseInt(card.substring("error-".length())), "test error");
        return;
      }
      int status = card.equals("declined") ? 402
          : card.startsWith("status-") ? Integer.parseInt(card.substring("status-".length())) : 201;
      resp.setStatus(status);
      resp.setContentType("application/json");
      resp.setHeader("Location", "/payments/pay_" + id);
      resp.setHeader("X-Run", Integer.toString(run));
      resp.getWriter().write("{\"id\":\"pay_" + id + "\",\"order\":\"" + order + "\",\"outcome\":\"" + outcome + "\"}");
    }
  }

  /**
   * Mapped before the idempotency filter: for a request with {@code X-Slow-Client: <order>}, the
   * first thing written to the response (status, body, flush) waits for that order's latch in
   * {@link #slowClients}, as a write to a client that does not read would.
   */
  final class SlowClient implements Filter {
    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain) throws IOException, ServletException {
      String order = ((HttpServletRequest) req).getHeader("X-Slow-Client");
      if (order == null) {
        chain.doFilter(req, res);
        return;
      }
      chain.doFilter(req, new HttpServletResponseWrapper((HttpServletResponse) res) {
        private boolean read;

        private void waitForTheClient() {
          if (read) {
            return;
          }
          read = true;
          answering.get(order).countDown();
          try {
            if (!slowClients.get(order).await(30, TimeUnit.SECONDS)) {
              throw new IllegalStateException("the test never let the slow client of " + order + " read");
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
          }
        }

        @Override
        public void setStatus(int sc) {
          waitForTheClient();
          super.setStatus(sc);
        }

        @Override
        public void sendError(int sc, String msg) throws IOException {
          waitForTheClient();
          super.sendError(sc, msg);
        }

        @Override
        public void sendError(int sc) throws IOException {
          waitForTheClient();
          super.sendError(sc);
        }

        @Override
        public ServletOutputStream getOutputStream() throws IOException {
          waitForTheClient();
          return super.getOutputStream();
        }

        @Override
        public void flushBuffer() throws IOException {
          waitForTheClient();
          super.flushBuffer();
        }
      });
    }
  }
}
