package dev.idem.examples.boot;

import dev.idem.testing.TestDatabase;
import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A benchmark, not a test: the Boot payments sample under a load generator over real HTTP on
 * loopback, a new key (and order) per request, relay off, on the run's database ({@link
 * TestDatabase}: PostgreSQL, or MariaDB with {@code -DIDEM_TEST_DATABASE=mariadb}) and a card
 * provider on loopback. Rounds alternate the two sides of each ratio (every other round in reverse
 * order), so a load that comes and goes on the machine lands on both.
 *
 * <ul>
 *   <li>{@code guard}: the same {@code POST /payments} with idem's filter on and off
 *       ({@code idem.http.enabled=false}), two instances of the sample on one database; the ratio
 *       guarded / unguarded.
 *   <li>{@code storm}: the guarded instance's rate for new keys, unloaded and while one request is
 *       held at the provider (in flight) and 50 clients send its key again and again, each at once
 *       after its answer (a 409 after {@code idem.http.in-flight-wait}, ignoring Retry-After: the
 *       worst client). The ratio storm / unloaded.
 * </ul>
 *
 * <pre>mvn -B -q -o -pl idem-examples -am test-compile dependency:build-classpath -Dmdep.outputFile=/tmp/cp.txt -Dmdep.includeScope=test
 * java -cp idem-examples/target/test-classes:idem-examples/target/classes:$(cat /tmp/cp.txt) dev.idem.examples.boot.PaymentsLoad guard|storm [rounds] [sliceMillis] [clients] [warmupRounds]</pre>
 */
public final class PaymentsLoad {
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  /** The amount of the storm's request, which the provider holds (every other request pays 100). */
  private static final int HELD = 777;
  private static final int STORM_CLIENTS = 50;

  private PaymentsLoad() {}

  public static void main(String[] args) throws Exception {
    String mode = args.length > 0 ? args[0] : "guard";
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    int slice = args.length > 2 ? Integer.parseInt(args[2]) : 5000;
    int clients = args.length > 3 ? Integer.parseInt(args[3]) : 16;
    int warmup = args.length > 4 ? Integer.parseInt(args[4]) : 6;
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    try (TestDatabase db = TestDatabase.newDatabase("payments_load"); CardProviderServer provider = new CardProviderServer()) {
      ConfigurableApplicationContext guarded = start(db, provider, true, clients);
      ConfigurableApplicationContext unguarded = mode.equals("guard") ? start(db, provider, false, clients) : null;
      try {
        URI on = payments(guarded);
        System.out.printf("%s on %s, %d clients, slices of %d ms, load %s%n", mode, db.vendor(), clients, slice, load());
        List<Double> ratios = new ArrayList<>();
        boolean guard = mode.equals("guard");
        // a: guarded, or new keys during the storm; b: unguarded, or new keys unloaded
        URI other = guard ? payments(unguarded) : on;
        CardProviderServer storm = guard ? null : provider;
        String format = guard ? "round %d: guarded %.0f/s, unguarded %.0f/s, ratio %.2f, load %s%n"
            : "round %d: during the storm %.0f/s, unloaded %.0f/s, ratio %.2f, load %s%n";
        // Warm-up rounds, as the measured ones but not counted: the rates climb for about a minute
        // while the JIT compiler works (Tomcat, Spring, the driver, both paths of the filter), and a
        // pair measured on the climb favours whichever side runs second.
        for (int r = -warmup; r < rounds; r++) {
          // the order alternates by round (the guard measured first in even rounds, the calm in the storm's)
          boolean aFirst = guard == (r % 2 == 0);
          double a;
          double b;
          if (aFirst) {
            a = rate(on, clients, slice, storm);
            b = rate(other, clients, slice, null);
          } else {
            b = rate(other, clients, slice, null);
            a = rate(on, clients, slice, storm);
          }
          if (r < 0) {
            System.out.printf("warm-up " + format.substring("round ".length()), r + warmup + 1, a, b, a / b, load());
            continue;
          }
          System.out.printf(format, r + 1, a, b, a / b, load());
          ratios.add(a / b);
        }
        System.out.printf("ratios %s, mean %.2f%n", ratios, ratios.stream().mapToDouble(Double::doubleValue).average().orElse(0));
      } finally {
        guarded.close();
        if (unguarded != null) {
          unguarded.close();
        }
      }
    }
  }

  private static ConfigurableApplicationContext start(TestDatabase db, CardProviderServer provider, boolean guard, int clients) {
    return new SpringApplicationBuilder(PaymentsApplication.class).run(
        "--spring.datasource.url=" + db.jdbcUrl(),
        "--server.port=0",
        "--payments.provider-url=" + provider.url(),
        "--idem.relay.enabled=false",
        // A request of this sample takes two connections at once (its transaction, and the charge's
        // claim, which commits on its own): with as many clients as connections every one can hold
        // the first and wait for the second until Hikari's 30 s timeout.
        "--spring.datasource.hikari.maximum-pool-size=" + (2 * clients + 2),
        "--idem.http.enabled=" + guard);
  }

  private static URI payments(ConfigurableApplicationContext app) {
    return URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port") + "/payments");
  }

  private static HttpResponse<Void> pay(URI uri, String key, String order, int amount) throws Exception {
    HttpRequest request = HttpRequest.newBuilder(uri)
        .header("Content-Type", "application/json")
        .header("X-Merchant-Id", "shop-1")
        .header("Idempotency-Key", key)
        .POST(HttpRequest.BodyPublishers.ofString("{\"order\":\"" + order + "\",\"amount\":" + amount + "}"))
        .build();
    return HTTP.send(request, HttpResponse.BodyHandlers.discarding());
  }

  /**
   * One client of the storm: the same request again and again on one keep-alive connection, written
   * as bytes made once. The storm's clients stand for other machines, but here they share the two
   * cores with the service and its database, so they are made as cheap as a client can be: each
   * copy costs this process a write and a read (the JDK's HttpClient spent about 0.6 ms of CPU a
   * request in its own threads, as much as the service's answer).
   */
  private static final class StormClient implements AutoCloseable {
    private final URI uri;
    private final byte[] request;
    private Socket socket;
    private InputStream in;

    StormClient(URI uri, String key, String order, int amount) {
      this.uri = uri;
      byte[] body = ("{\"order\":\"" + order + "\",\"amount\":" + amount + "}").getBytes(StandardCharsets.UTF_8);
      String head = "POST " + uri.getPath() + " HTTP/1.1\r\nHost: " + uri.getHost() + ":" + uri.getPort()
          + "\r\nContent-Type: application/json\r\nX-Merchant-Id: shop-1\r\nIdempotency-Key: " + key
          + "\r\nContent-Length: " + body.length + "\r\n\r\n";
      byte[] h = head.getBytes(StandardCharsets.US_ASCII);
      this.request = Arrays.copyOf(h, h.length + body.length);
      System.arraycopy(body, 0, request, h.length, body.length);
    }

    /** Sends the request and reads the whole answer; a closed connection is opened again. */
    void send() throws IOException {
      for (int tries = 0; ; tries++) {
        try {
          if (socket == null) {
            socket = new Socket(uri.getHost(), uri.getPort());
            socket.setTcpNoDelay(true);
            in = new BufferedInputStream(socket.getInputStream());
          }
          socket.getOutputStream().write(request);
          if (readAnswer()) {
            return;
          }
        } catch (IOException e) {
          if (tries > 0) {
            throw e;
          }
        }
        close(); // the server closed it (keep-alive ends after 100 requests): once more, on a new one
      }
    }

    /** Reads the status line, the headers and a body of Content-Length or chunks; false at EOF. */
    private boolean readAnswer() throws IOException {
      String line = line();
      if (line == null) {
        return false;
      }
      long length = 0;
      boolean chunked = false;
      boolean closing = false;
      while (!(line = line()).isEmpty()) {
        String lower = line.toLowerCase(Locale.ROOT);
        if (lower.startsWith("content-length:")) {
          length = Long.parseLong(lower.substring("content-length:".length()).trim());
        } else if (lower.startsWith("transfer-encoding:") && lower.contains("chunked")) {
          chunked = true;
        } else if (lower.startsWith("connection:") && lower.contains("close")) {
          closing = true;
        }
      }
      if (chunked) {
        long chunk;
        while ((chunk = Long.parseLong(line().trim(), 16)) > 0) {
          in.skipNBytes(chunk);
          line();
        }
        line();
      } else {
        in.skipNBytes(length);
      }
      if (closing) {
        close();
      }
      return true;
    }

    private String line() throws IOException {
      StringBuilder b = new StringBuilder();
      int c;
      while ((c = in.read()) != '\n') {
        if (c < 0) {
          if (b.length() == 0) {
            return null;
          }
          throw new EOFException("the answer ended in a line: " + b);
        }
        if (c != '\r') {
          b.append((char) c);
        }
      }
      return b.toString();
    }

    @Override
    public void close() {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException ignored) {
          // closing a socket the server may have closed first
        }
        socket = null;
      }
    }
  }

  /**
   * New keys a second that {@code clients} clients (each one request at a time) get answered 201
   * in {@code millis}; with {@code storm} set, while one request is held there and 50 clients
   * repeat its key.
   */
  private static double rate(URI uri, int clients, int millis, CardProviderServer storm) throws Exception {
    AtomicBoolean on = new AtomicBoolean(true);
    AtomicLong created = new AtomicLong();
    AtomicLong other = new AtomicLong();
    AtomicLong copies = new AtomicLong();
    List<Thread> threads = new ArrayList<>();
    Thread held = null;
    if (storm != null) {
      String key = UUID.randomUUID().toString();
      String order = "storm-" + key;
      storm.heldAmount = HELD;
      storm.amountHold = new CountDownLatch(1);
      storm.held = new CountDownLatch(1);
      held = spawn("held", () -> call(() -> pay(uri, key, order, HELD)));
      storm.held.await();
      for (int i = 0; i < STORM_CLIENTS; i++) {
        threads.add(spawn("storm-client", () -> {
          try (StormClient copy = new StormClient(uri, key, order, HELD)) {
            while (on.get()) {
              copy.send();
              copies.incrementAndGet();
            }
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }));
      }
    }
    long[] window = new long[2];
    CountDownLatch started = new CountDownLatch(1);
    for (int i = 0; i < clients; i++) {
      threads.add(spawn("client", () -> {
        try {
          started.await();
        } catch (InterruptedException e) {
          return;
        }
        while (on.get()) {
          HttpResponse<Void> r = call(() -> pay(uri, UUID.randomUUID().toString(), "o-" + UUID.randomUUID(), 100));
          if (r != null && r.statusCode() == 201 && on.get()) {
            created.incrementAndGet();
          } else if (on.get()) {
            other.incrementAndGet();
          }
        }
      }));
    }
    Map<String, Long> cpuBefore = SHARES ? threadCpu() : null;
    window[0] = System.nanoTime();
    started.countDown();
    Thread.sleep(millis);
    long done = created.get();
    window[1] = System.nanoTime();
    if (SHARES) {
      printShares(storm != null, cpuBefore, threadCpu(), window[1] - window[0]);
      if (storm != null) {
        System.out.printf("  storm copies %.0f/s%n", copies.get() / ((window[1] - window[0]) / 1e9));
      }
    }
    on.set(false);
    if (storm != null) {
      storm.amountHold.countDown();
      storm.heldAmount = 0;
    }
    for (Thread t : threads) {
      t.join();
    }
    if (held != null) {
      held.join();
    }
    if (other.get() > 0) {
      System.out.printf("  (%d answers other than 201)%n", other.get());
    }
    return done / ((window[1] - window[0]) / 1e9);
  }

  @FunctionalInterface
  private interface Call {
    HttpResponse<Void> send() throws Exception;
  }

  private static HttpResponse<Void> call(Call c) {
    try {
      return c.send();
    } catch (Exception e) {
      return null;
    }
  }

  private static Thread spawn(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.start();
    return t;
  }

  /** With -Dshares=true: each slice's JVM CPU by thread group, in ms of CPU per second. */
  private static final boolean SHARES = Boolean.getBoolean("shares");

  private static Map<String, Long> threadCpu() {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    Map<String, Long> cpu = new TreeMap<>();
    for (ThreadInfo t : mx.getThreadInfo(mx.getAllThreadIds())) {
      if (t != null) {
        long ns = mx.getThreadCpuTime(t.getThreadId());
        if (ns > 0) {
          cpu.merge(group(t.getThreadName()), ns, Long::sum);
        }
      }
    }
    return cpu;
  }

  private static String group(String thread) {
    if (thread.startsWith("HttpClient-")) {
      int dash = thread.indexOf('-', "HttpClient-".length());
      return dash < 0 ? thread : thread.substring(0, dash);
    }
    if (thread.startsWith("http-nio-")) {
      return "tomcat";
    }
    return thread.replaceAll("[-#]?\\d+$", "");
  }

  private static void printShares(boolean storm, Map<String, Long> before, Map<String, Long> after, long nanos) {
    StringBuilder line = new StringBuilder(storm ? "  cpu ms/s, storm:" : "  cpu ms/s, calm: ");
    after.forEach((g, ns) -> {
      double perSecond = (ns - before.getOrDefault(g, 0L)) / (nanos / 1e3);
      if (perSecond >= 5) {
        line.append(String.format(" %s %.0f", g, perSecond));
      }
    });
    System.out.println(line);
  }

  private static String load() {
    return String.format("%.2f", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
  }
}
