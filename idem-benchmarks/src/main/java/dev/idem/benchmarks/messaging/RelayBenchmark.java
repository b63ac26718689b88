package dev.idem.benchmarks.messaging;

import com.zaxxer.hikari.HikariConfig;
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

/**
 * Relay throughput with a no-op publisher: each invocation drains a backlog of {@value #BACKLOG}
 * committed outbox messages (enqueued through {@link Outbox#enqueue} before the timer starts) until
 * every one is marked sent, by {@code relays} relays on their own threads and connections, each
 * claiming {@code batchSize} at a time. The score is the time per message from "pending" to "marked
 * sent", in microseconds ({@code @OperationsPerInvocation}); messages per second = 1,000,000 / score.
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
  byte[] payload = new byte[200];

  @Setup(Level.Trial)
  public void start() {
    db = TestPostgres.newDatabase("bench_relay");
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(db.jdbcUrl());
    config.setMaximumPoolSize(8);
    config.setMinimumIdle(8);
    ds = new HikariDataSource(config);
    idem = Idem.builder(ds).build();
    idem.migrate();
    outbox = idem.outbox();
    relayList = new ArrayList<>();
    for (int i = 0; i < relays; i++) {
      relayList.add(idem.relay(m -> {}).batchSize(batchSize).build());
    }
    pool = Executors.newFixedThreadPool(relays);
  }

  /** A fresh backlog each time, on an emptied table, so every invocation does the same work. */
  @Setup(Level.Invocation)
  public void fill() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("TRUNCATE idem.idem_outbox");
    }
    for (int done = 0; done < BACKLOG; done += ENQUEUE_PER_TX) {
      idem.useTransaction(tx -> {
        for (int i = 0; i < ENQUEUE_PER_TX; i++) {
          outbox.enqueue(tx, NewMessage.of("bench", payload).withAggregateKey("k" + (i % 64)).withHeader("type", "Bench"));
        }
      });
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("VACUUM ANALYZE idem.idem_outbox");
    }
  }

  @Benchmark
  @OperationsPerInvocation(BACKLOG)
  public int drain() throws Exception {
    List<Future<Integer>> running = new ArrayList<>();
    for (Relay relay : relayList) {
      running.add(pool.submit(() -> {
        int total = 0;
        for (int n; (n = relay.runOnce()) > 0; ) {
          total += n;
        }
        return total;
      }));
    }
    int total = 0;
    for (Future<Integer> f : running) {
      total += f.get();
    }
    if (total != BACKLOG) {
      throw new IllegalStateException("drained " + total + " of " + BACKLOG);
    }
    return total;
  }

  @TearDown(Level.Trial)
  public void stop() {
    pool.shutdownNow();
    ds.close();
    db.close();
  }
}
