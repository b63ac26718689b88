package dev.idem.examples.boot;

import dev.idem.testing.TestDatabase;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
 * java -cp idem-examples/target/test-classes:idem-examples/target/classes:$(cat /tmp/cp.txt) dev.idem.examples.boot.PaymentsLoad guard|storm [rounds] [sliceMillis] [clients]</pre>
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
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    try (TestDatabase db = TestDatabase.newDatabase("payments_load"); CardProviderServer provider = new CardProviderServer()) {
      ConfigurableApplicationContext guarded = start(db, provider, true, clients);
      ConfigurableApplicationContext unguarded = mode.equals("guard") ? start(db, provider, false, clients) : null;
      try {
        URI on = payments(guarded);
        System.out.printf("%s on %s, %d clients, slices of %d ms, load %s%n", mode, db.vendor(), clients, slice, load());
        // warm-up: both sides, unmeasured
        rate(on, clients, slice, null);
        if (unguarded != null) {
          rate(payments(unguarded), clients, slice, null);
        }
        List<Double> ratios = new ArrayList<>();
        boolean guard = mode.equals("guard");
        // a: guarded, or new keys during the storm; b: unguarded, or new keys unloaded
        URI other = guard ? payments(unguarded) : on;
        CardProviderServer storm = guard ? null : provider;
        String format = guard ? "round %d: guarded %.0f/s, unguarded %.0f/s, ratio %.2f, load %s%n"
            : "round %d: during the storm %.0f/s, unloaded %.0f/s, ratio %.2f, load %s%n";
        for (int r = 0; r < rounds; r++) {
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
   * New keys a second that {@code clients} clients (each one request at a time) get answered 201
   * in {@code millis}; with {@code storm} set, while one request is held there and 50 clients
   * repeat its key.
   */
  private static double rate(URI uri, int clients, int millis, CardProviderServer storm) throws Exception {
    AtomicBoolean on = new AtomicBoolean(true);
    AtomicLong created = new AtomicLong();
    AtomicLong other = new AtomicLong();
    List<Thread> threads = new ArrayList<>();
    Thread held = null;
    if (storm != null) {
      String key = UUID.randomUUID().toString();
      String order = "storm-" + key;
      storm.heldAmount = HELD;
      storm.amountHold = new CountDownLatch(1);
      storm.held = new CountDownLatch(1);
      held = spawn(() -> call(() -> pay(uri, key, order, HELD)));
      storm.held.await();
      for (int i = 0; i < STORM_CLIENTS; i++) {
        threads.add(spawn(() -> {
          while (on.get()) {
            call(() -> pay(uri, key, order, HELD));
          }
        }));
      }
    }
    long[] window = new long[2];
    CountDownLatch started = new CountDownLatch(1);
    for (int i = 0; i < clients; i++) {
      threads.add(spawn(() -> {
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
    window[0] = System.nanoTime();
    started.countDown();
    Thread.sleep(millis);
    long done = created.get();
    window[1] = System.nanoTime();
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

  private static Thread spawn(Runnable r) {
    Thread t = new Thread(r);
    t.start();
    return t;
  }

  private static String load() {
    return String.format("%.2f", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
  }
}
