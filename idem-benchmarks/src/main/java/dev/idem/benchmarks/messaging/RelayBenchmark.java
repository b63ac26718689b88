package dev.idem.benchmarks.messaging;

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
 * committed outbox messages (enqueued through {@link Outbox#enqueue} before the timer starts) until
 * every one is marked sent, by {@code relays} relays on their own threads and connections, each
 * claiming {@code batchSize} at a time. The score is the time per message from "pending" to "marked
 * sent", in microseconds ({@code @OperationsPerInvocation}); messages per second = 1,000,000 / score.
 *
 * <p>{@link #enqueueAndDrain} times the whole path instead: one producer thread enqueues the
 * {@value #BACKLOG} messages ({@value #ENQUEUE_PER_TX} per transaction) while the relays drain them
 * at the same time, until the last is marked sent.
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
  static final int ENQUEUE_PER_TX = 1_000;

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
    idem.migrate();
    outbox = idem.outbox();
    relayList = new ArrayList<>();
    for (int i = 0; i < relays; i++) {
      relayList.add(idem.relay(m -> {}).batchSize(batchSize).build());
    }
    pool = Executors.newFixedThreadPool(relays);
    producerPool = Executors.newSingleThreadExecutor();
  }

  /** An emptied table each time; for {@link #drain}, a fresh backlog, so every invocation does the same work. */
  @Setup(Level.Invocation)
  public void fill(BenchmarkParams params) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("TRUNCATE idem.idem_outbox");
    }
    if (params.getBenchmark().endsWith(".drain")) {
      enqueueAll();
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("VACUUM ANALYZE idem.idem_outbox");
    }
  }

  private Integer enqueueAll() {
    for (int done = 0; done < BACKLOG; done += ENQUEUE_PER_TX) {
      idem.useTransaction(tx -> {
        for (int i = 0; i < ENQUEUE_PER_TX; i++) {
          outbox.enqueue(tx, NewMessage.of("bench", payload).withAggregateKey("k" + (i % 64)).withHeader("type", "Bench"));
        }
      });
    }
    return BACKLOG;
  }

  @Benchmark
  @OperationsPerInvocation(BACKLOG)
  public int drain() throws Exception {
    return relayUntil(BACKLOG, null);
  }

  @Benchmark
  @OperationsPerInvocation(BACKLOG)
  public int enqueueAndDrain() throws Exception {
    Future<Integer> producer = producerPool.submit(this::enqueueAll);
    return relayUntil(BACKLOG, producer);
  }

  /**
   * Runs every relay on its own thread until {@code expected} messages were sent (with a producer),
   * or until each finds nothing left to claim (a complete backlog).
   */
  private int relayUntil(int expected, Future<Integer> producer) throws Exception {
    AtomicInteger sent = new AtomicInteger();
    List<Future<?>> running = new ArrayList<>();
    for (Relay relay : relayList) {
      running.add(pool.submit(() -> {
        while (sent.get() < expected) {
          int n = relay.runOnce();
          if (n > 0) {
            sent.addAndGet(n);
          } else if (producer == null) {
            break; // a complete backlog: what is left, other relays hold
          } else {
            Thread.sleep(1); // the producer has not committed more yet, or other relays hold it
          }
        }
        return null;
      }));
    }
    for (Future<?> f : running) {
      f.get();
    }
    if (producer != null) {
      producer.get();
    }
    if (sent.get() != expected) {
      throw new IllegalStateException("sent " + sent.get() + " of " + expected);
    }
    return sent.get();
  }

  @TearDown(Level.Trial)
  public void stop() {
    pool.shutdownNow();
    producerPool.shutdownNow();
    ds.close();
    db.close();
  }
}
