package dev.idem.http;

import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.testing.Poll;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * A retry storm: 50 copies of one slow request, on real threads over loopback, spread over several
 * instances of the filter (each a process of its own to the others: its own in-memory waits), while
 * other keys are served. The copies must not take the pool: only the running copy holds a
 * connection, whichever instance a copy reached. Read from the pool's own count (HikariCP's MXBean)
 * and from the payment and key rows.
 */
class RetryStormTest extends AbstractHttpTest {
  private static final int COPIES = 50;
  /** Instances of the filter: the copies reaching the 5 that do not run the key must not wait on its row lock. */
  private static final int INSTANCES = 6;
  /** Clients sending new keys during the storm, one request at a time each. */
  private static final int OTHERS = 2;

  @Test
  void fiftyCopiesOfARunningKeyHoldNoConnectionsWhileOtherKeysAreServed() throws Exception {
    List<URI> instances = new ArrayList<>();
    for (int i = 0; i < INSTANCES; i++) {
      instances.add(f.serve(b -> b.inFlightWait(Duration.ofSeconds(30))));
    }
    HikariDataSource pool = (HikariDataSource) f.ds;
    String order = HttpFixture.unique("storm");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> running =
        CompletableFuture.supplyAsync(() -> post(instances.get(0), payment(order, 5, "block"), key));
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();
    long parked = HttpFixture.parkedCopies();

    ExecutorService senders = Executors.newFixedThreadPool(COPIES + OTHERS);
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < COPIES; i++) {
      URI to = instances.get(i % INSTANCES);
      copies.add(CompletableFuture.supplyAsync(() -> post(to, payment(order, 5, "block"), key), senders));
    }
    AtomicBoolean storming = new AtomicBoolean(true);
    List<String> otherOrders = new CopyOnWriteArrayList<>();
    List<Integer> otherStatuses = new CopyOnWriteArrayList<>();
    List<CompletableFuture<Void>> others = new ArrayList<>();
    for (int c = 0; c < OTHERS; c++) {
      int client = c;
      others.add(CompletableFuture.runAsync(() -> {
        for (int n = 0; storming.get() || n < 3; n++) {
          String other = HttpFixture.unique("other");
          otherOrders.add(other);
          otherStatuses.add(post(instances.get((client + n) % INSTANCES), payment(other, 1, "ok"), HttpFixture.unique("k")).statusCode());
        }
      }, senders));
    }
    // Every copy waits in memory: on the running copy in its instance, or, in each other instance,
    // on the one copy there that asks the database between pauses.
    Poll.until("the copies wait in memory", () -> HttpFixture.parkedCopies() - parked == COPIES - (INSTANCES - 1));

    List<Integer> active = new ArrayList<>();
    for (int sample = 0; sample < 20; sample++) {
      active.add(pool.getHikariPoolMXBean().getActiveConnections());
      Thread.sleep(5); // samples spread over the storm; nothing is asserted about time
    }
    // The running copy, each client of other keys, and at most two of the 5 asking copies caught in
    // a claim at the same instant. Waiting on the row lock, the 5 would hold 5 connections throughout.
    assertThat(active).allSatisfy(n -> assertThat(n).isLessThanOrEqualTo(1 + OTHERS + 2));
    assertThat(f.runs.get(order)).as("the handler ran once").hasValue(1);

    gate.countDown();
    HttpResponse<String> first = running.get(30, TimeUnit.SECONDS);
    assertThat(first.statusCode()).isEqualTo(201);
    List<HttpResponse<String>> answers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> c : copies) {
      answers.add(c.get(60, TimeUnit.SECONDS));
    }
    storming.set(false);
    for (CompletableFuture<Void> o : others) {
      o.get(60, TimeUnit.SECONDS);
    }
    senders.shutdown();

    // A recognised repeat is never an error: every copy got the first response, byte for byte.
    assertThat(answers).allSatisfy(r -> {
      assertThat(r.statusCode()).isEqualTo(201);
      assertThat(r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
      assertThat(r.body()).isEqualTo(first.body());
    });
    assertThat(f.runs.get(order)).hasValue(1);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    // The other keys were served during the storm, each once.
    assertThat(otherStatuses).isNotEmpty().containsOnly(201);
    assertThat(otherOrders).allSatisfy(o -> assertThat(f.payments(o)).isEqualTo(1));
  }
}
