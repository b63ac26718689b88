package dev.idem.benchmarks.messaging;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * Relay throughput with a no-op publisher: each invocation drains a backlog of {@value #BACKLOG}
 * committed outbox messages (enqueued through {@link Outbox#enqueueAll} before the timer starts) until
 * every one is marked sent, by {@code relays} relays on their own threads and connections, each
 * claiming {@code batchSize} at a time. The score is the time per message from "pending" to "marked
 * sent", in microseconds ({@code @OperationsPerInvocation}); messages per second = 1,000,000 / score.
 *
 * <p>{@link #enqueueAndDrain} times the whole path instead, from enqueue to marked sent: while the
 * relays drain, {@value #PRODUCERS} producer threads enqueue the {@value #BACKLOG} messages as a
 * service would, each transaction writing {@value #MESSAGES_PER_TX} messages with one {@link
 * Outbox#enqueueAll} (a business transaction emitting several events: an order placed, a payment
 * request, an email request, and so on), built in the transaction from a 200-byte payload, an
 * aggregate key and a header. The clock stops when the last message is marked sent. Why these
 * numbers: 10 messages a transaction is a generous but plausible business transaction; 4 producers
 * let concurrent commits share the WAL flush, as a service's request threads do, and with 4 relays
 * they fill the pool of 8 connections, so no thread waits for a connection. The relays run their
 * batches as {@link Relay#start()}'s loop does, back to back while they send something and
 * otherwise after a poll interval, here {@value #POLL_MILLIS} ms (the default 500 ms would add up to
 * half a second to runs of about one).
 *
 * <p>Run: {@code java -jar idem-benchmarks/target/benchmarks.jar RelayBenchmark}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 2)
@Measurement(iterations = 5)
public class RelayBenchmark {
  static final int BACKLOG = 20_000;
  /** Messages per transaction of the backlog {@link #drain} starts from (set-up, not timed). */
  static final int FILL_PER_TX = 1_000;
  /** Producer threads of {@link #enqueueAndDrain}. */
  static final int PRODUCERS = 4;
  /** Messages per producer transaction, in one {@link Outbox#enqueueAll}. */
  static final int MESSAGES_PER_TX = 10;
  /** The relays' poll interval in {@link #enqueueAndDrain}: their wait after a batch that sent nothing. */
  static final int POLL_MILLIS = 5;

  @Param({"100", "500"})
  public int batchSize;

  @Param({"1", "4"})
  public int relays;

  TestDatabase db;
  HikariDataSource ds;
  Idem idem;
  Outbox outbox;
  List<Relay> relayList;
  ExecutorService pool;
  ExecutorService producerPool;
  byte[] payload = new byte[200];

  @Setup(Level.Trial)
  public void start() {
    db = TestPostgres.newDatabase("bench_relay");
    ds = db.warmDataSource(8);
    idem = Idem.builder(ds).build();
    IdemFlyway.migrate(ds);
    outbox = idem.outbox();
    relayList = new ArrayList<>();
    for (int i = 0; i < relays; i++) {
      relayList.add(idem.relay(m -> {}).batchSize(batchSize).build());
    }
    pool = Executors.newFixedThreadPool(relays);
    producerPool = Executors.newFixedThreadPool(PRODUCERS);
  }

  /** An emptied table each time; for {@link #drain}, a fresh backlog, so every invocation does the same work. */
  @Setup(Level.Invocation)
  public void fill(BenchmarkParams params) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("TRUNCATE idem.idem_outbox");
    }
    if (params.getBenchmark().endsWith(".drain")) {
      enqueue(BACKLOG, FILL_PER_TX);
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("VACUUM ANALYZE idem.idem_outbox");
    }
  }

  /** Enqueues {@code total} messages, {@code perTx} a transaction, as one producer. */
  private Integer enqueue(int total, int perTx) {
    for (int done = 0; done < total; done += perTx) {
      idem.useTransaction(tx -> {
        List<NewMessage> batch = new ArrayList<>(perTx);
        for (int i = 0; i < perTx; i++) {
          batch.add(NewMessage.of("bench", payload).withAggregateKey("k" + (i % 64)).withHeader("type", "Bench"));
        }
        outbox.enqueueAll(batch);
      });
    }
    return total;
  }

  @Benchmark
  @OperationsPerInvocation(BACKLOG)
  public int drain() throws Exception {
    return relayUntil(BACKLOG, List.of());
  }

  @Benchmark
  @OperationsPerInvocation(BACKLOG)
  public int enqueueAndDrain() throws Exception {
    List<Future<Integer>> producers = new ArrayList<>();
    for (int p = 0; p < PRODUCERS; p++) {
      producers.add(producerPool.submit(() -> enqueue(BACKLOG / PRODUCERS, MESSAGES_PER_TX)));
    }
    return relayUntil(BACKLOG, producers);
  }

  /**
   * Runs every relay on its own thread until {@code expected} messages were sent. With producers,
   * each relay runs its batches the way {@link Relay#start()}'s loop does: back to back while they
   * send something, otherwise after a wait of {@value #POLL_MILLIS} ms (the poll interval). Without
   * producers (a complete backlog), back to back until each finds nothing left to claim.
   */
  private int relayUntil(int expected, List<Future<Integer>> producers) throws Exception {
    AtomicInteger sent = new AtomicInteger();
    List<Future<?>> running = new ArrayList<>();
    for (Relay relay : relayList) {
      running.add(pool.submit(() -> {
        while (sent.get() < expected) {
          int n = relay.runOnce();
          sent.addAndGet(n);
          if (producers.isEmpty()) {
            if (n == 0) {
              break; // a complete backlog: what is left, other relays hold
            }
          } else if (anyFailed(producers)) {
            break; // reported below
          } else if (n == 0) {
            Thread.sleep(POLL_MILLIS); // the producers have not committed more yet, or other relays hold it
          }
        }
        return null;
      }));
    }
    for (Future<?> f : running) {
      f.get();
    }
    for (Future<Integer> f : producers) {
      f.get();
    }
    if (sent.get() != expected) {
      throw new IllegalStateException("sent " + sent.get() + " of " + expected);
    }
    return sent.get();
  }

  private static boolean anyFailed(List<Future<Integer>> producers) {
    for (Future<Integer> f : producers) {
      if (f.isDone()) {
        try {
          f.get();
        } catch (Exception e) {
          return true;
        }
      }
    }
    return false;
  }

  @TearDown(Level.Trial)
  public void stop() {
    pool.shutdownNow();
    producerPool.shutdownNow();
    ds.close();
    db.close();
  }
}
