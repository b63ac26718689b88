package dev.idem.http.client;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Collections;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.catalina.Context;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.startup.Tomcat;

/**
 * A payment provider on a real HTTP server (an embedded Tomcat) on loopback ({@code POST
 * /charges}), deduping by the idempotency header as Stripe does: the first request under a key
 * charges and stores its answer; every later request under that key gets the stored answer
 * ({@code Idempotent-Replayed: true}) and charges nothing. {@link #received} records every request
 * that reached it, with the header values it carried and when it arrived; {@link #charges} holds
 * one charge per key. The key is only in the header: the request's body is read and ignored.
 *
 * <p>What it answers is scripted: {@link #script} is consumed one answer per request; when it is
 * empty, {@link #otherwise} answers (by default: charge).
 */
final class ChargeProvider implements AutoCloseable {

  /** One request as it reached the provider. */
  record Received(List<String> keys, long nanos, Instant at) {
    /** The one key it carried (fails if it carried none or several). */
    String key() {
      if (keys.size() != 1) {
        throw new AssertionError("expected one key header, got " + keys);
      }
      return keys.get(0);
    }
  }

  /** How the provider answers one request carrying {@code key} (null when it carried none). */
  @FunctionalInterface
  interface Answer {
    void answer(ChargeProvider provider, HttpServletResponse response, String key) throws IOException;
  }

  /** Charges once per key; a repeat gets the stored answer. */
  static final Answer CHARGE = (p, ex, key) -> {
    if (key == null) {
      p.respond(ex, 400, null, "missing key");
      return;
    }
    boolean[] fresh = {false};
    String charge = p.charges.computeIfAbsent(key, k -> {
      fresh[0] = true;
      return "ch_" + p.nextCharge.incrementAndGet();
    });
    if (!fresh[0]) {
      ex.addHeader("Idempotent-Replayed", "true");
    }
    p.respond(ex, 200, null, charge);
  };

  /** Answers {@code status} (with {@code Retry-After} if not null) without charging. */
  static Answer status(int status, String retryAfter) {
    return (p, ex, key) -> p.respond(ex, status, retryAfter, "status " + status);
  }

  /** Charges, then answers {@code status}: the charge happened but the caller cannot tell. */
  static Answer chargeThen(int status) {
    return (p, ex, key) -> {
      p.charges.computeIfAbsent(key, k -> "ch_" + p.nextCharge.incrementAndGet());
      p.respond(ex, status, null, "status " + status);
    };
  }

  /**
   * Breaks the connection in the middle of the answer without charging: the answer's head goes out
   * promising 1,000 bytes, a few follow, and the handler fails, so Tomcat closes the connection.
   */
  static final Answer DROP = (p, ex, key) -> {
    ex.setStatus(200);
    ex.setContentLength(1_000);
    ex.getOutputStream().write("ch_".getBytes(StandardCharsets.UTF_8));
    ex.flushBuffer();
    throw new IOException("the provider drops the connection");
  };

  /** Charges, then the connection breaks in the middle of the answer: the reply is lost. */
  static final Answer CHARGE_THEN_DROP = (p, ex, key) -> {
    p.charges.computeIfAbsent(key, k -> "ch_" + p.nextCharge.incrementAndGet());
    DROP.answer(p, ex, key);
  };

  /** Holds the request until the provider closes (the caller's timeout ends it first). */
  static final Answer HANG = (p, ex, key) -> {
    try {
      p.closing.await(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    throw new IOException("hung");
  };

  final String header;
  final List<Received> received = new CopyOnWriteArrayList<>();
  /** Key to charge id: one charge per key. */
  final Map<String, String> charges = new ConcurrentHashMap<>();
  final Queue<Answer> script = new ConcurrentLinkedQueue<>();
  volatile Answer otherwise = CHARGE;

  private final AtomicLong nextCharge = new AtomicLong();
  private final CountDownLatch closing = new CountDownLatch(1);
  private final Tomcat tomcat = new Tomcat();
  private final int port;

  ChargeProvider(String header) throws IOException {
    this.header = header;
    tomcat.setBaseDir(Files.createTempDirectory("idem-http-provider").toString());
    tomcat.setPort(0);
    onConnector(tomcat, "setProperty", "address", "127.0.0.1");
    Context context = tomcat.addContext("", null);
    Tomcat.addServlet(context, "charges", new HttpServlet() {
      private static final long serialVersionUID = 1L;

      @Override
      protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle(req, resp);
      }
    });
    context.addServletMappingDecoded("/charges", "charges");
    try {
      tomcat.start();
    } catch (LifecycleException e) {
      throw new IOException("the provider did not start", e);
    }
    port = (Integer) onConnector(tomcat, "getLocalPort");
  }

  ChargeProvider() throws IOException {
    this(CallPolicy.DEFAULT_HEADER);
  }

  /**
   * Calls a method of Tomcat's connector by reflection: the tests compile inside module
   * dev.idem.http, which does not read java.management, and the Connector is an MBean.
   */
  private static Object onConnector(Tomcat tomcat, String method, String... args) {
    Object connector = tomcat.getConnector();
    Class<?>[] types = new Class<?>[args.length];
    java.util.Arrays.fill(types, String.class);
    try {
      return connector.getClass().getMethod(method, types).invoke(connector, (Object[]) args);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("could not call the connector's " + method, e);
    }
  }

  URI uri() {
    return URI.create("http://127.0.0.1:" + port + "/charges");
  }

  /** Scripts the next answers, in order. */
  ChargeProvider then(Answer... answers) {
    script.addAll(List.of(answers));
    return this;
  }

  /** The requests that carried {@code key}. */
  List<Received> requestsWith(String key) {
    return received.stream().filter(r -> r.keys().contains(key)).toList();
  }

  /** Waits until at least {@code n} requests arrived; false if they did not within {@code limit}. */
  synchronized boolean awaitRequests(int n, Duration limit) throws InterruptedException {
    long deadline = System.nanoTime() + limit.toNanos();
    while (received.size() < n) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }

  private void handle(HttpServletRequest req, HttpServletResponse resp) throws IOException {
    try (InputStream in = req.getInputStream()) {
      in.readAllBytes();
    }
    List<String> keys = Collections.list(req.getHeaders(header));
    received.add(new Received(keys, System.nanoTime(), Instant.now()));
    synchronized (this) {
      notifyAll();
    }
    Answer a = script.poll();
    (a != null ? a : otherwise).answer(this, resp, keys.isEmpty() ? null : keys.get(0));
  }

  void respond(HttpServletResponse ex, int status, String retryAfter, String body) throws IOException {
    if (retryAfter != null) {
      ex.setHeader("Retry-After", retryAfter);
    }
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    ex.setStatus(status);
    ex.setContentLength(bytes.length);
    try (OutputStream out = ex.getOutputStream()) {
      out.write(bytes);
    }
  }

  @Override
  public void close() {
    closing.countDown();
    try {
      tomcat.stop();
      tomcat.destroy();
    } catch (LifecycleException e) {
      // a server that will not stop must not hide the test's result
    }
  }
}
