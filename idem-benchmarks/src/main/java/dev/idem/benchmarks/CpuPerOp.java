package dev.idem.benchmarks;

import static dev.idem.benchmarks.RepeatBenchmark.SCOPE;
import static dev.idem.benchmarks.RepeatBenchmark.fingerprint;
import static dev.idem.benchmarks.RepeatBenchmark.mustNotRun;
import static dev.idem.benchmarks.RepeatBenchmark.pay;
import static dev.idem.benchmarks.RepeatBenchmark.payment;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.sql.DataSource;

/**
 * The client's CPU per operation, the figure issue 37's first target is stated in: for each of
 * {@link RepeatBenchmark}'s yardsticks and idem's forms (same tables, same keys applied by another
 * instance, same checks), the CPU time the calling thread spent per operation ({@code
 * ThreadMXBean.getCurrentThreadCpuTime}, read around each operation: the pool, the driver and idem
 * all run on the caller's thread, and the JIT and GC threads are left out) and the bytes it
 * allocated per operation. Thread CPU time moves far less with the machine's load than throughput
 * does; it is what to compare on a shared machine. A second pass counts round trips per operation
 * on the same methods, on an {@link Idem} over a counting DataSource ({@link RoundTrips}).
 *
 * <p>{@code executorSparseRepeat} / {@code inboxSparseRepeat}: a cold repeat (a key another
 * instance applied, this instance never saw) arriving among new keys, one after every {@value
 * #SPARSE_EVERY} new keys on the same guard; only the repeat is measured. {@code nothing} is the
 * measurement's own cost. {@code bareEffectJooq}: the bare transaction with the payment insert
 * given as the jOOQ statement the statements forms are given, run by jOOQ. {@code naiveGuardNewKey}
 * and {@code naiveGuardNewKeyStored}: {@link RepeatBenchmark}'s hand-rolled guards, the callback
 * forms' like-for-like yardsticks (their claim answers before the effect runs, a round trip the
 * bare transaction does not make).
 *
 * <p>One thread; the methods alternate, every other round in reverse order, in {@code rounds}
 * rounds of {@code ops} operations each (a sparse repeat's: {@code ops / SPARSE_EVERY}) after
 * {@link #WARMUP_ROUNDS} unmeasured ones; the median of the rounds and the least are printed.
 *
 * <pre>java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.CpuPerOp [rounds] [ops] [method,method...]</pre>
 */
public final class CpuPerOp {
  /** New keys between two repeats of a sparse-repeat method. */
  static final int SPARSE_EVERY = 9;
  /** Rounds run before the measured ones, while the JIT compiler settles: 2, or {@code -DwarmupRounds}. */
  static final int WARMUP_ROUNDS = Integer.getInteger("warmupRounds", 2);
  private static final com.sun.management.ThreadMXBean THREADS =
      (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

  private CpuPerOp() {}

  /** One operation; {@link #measure} is called around the part that counts. */
  @FunctionalInterface
  interface Op {
    void run(Meter m) throws Exception;
  }

  /** Sums the CPU time and allocation of the parts of operations it measured. */
  static final class Meter {
    /** Counts round trips instead, if not null. */
    final RoundTrips trips;
    long cpuNanos;
    long bytes;
    long ops;
    long tripCount;

    Meter(RoundTrips trips) {
      this.trips = trips;
    }

    void measure(Step step) throws Exception {
      if (trips != null) {
        long before = trips.count();
        step.run();
        tripCount += trips.count() - before;
        ops++;
        return;
      }
      long cpu = THREADS.getCurrentThreadCpuTime();
      long allocated = THREADS.getCurrentThreadAllocatedBytes();
      step.run();
      bytes += THREADS.getCurrentThreadAllocatedBytes() - allocated;
      cpuNanos += THREADS.getCurrentThreadCpuTime() - cpu;
      ops++;
    }
  }

  @FunctionalInterface
  interface Step {
    void run() throws Exception;
  }

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    int ops = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
    Set<String> only = args.length > 2 ? Set.of(args[2].split(",")) : null;
    RepeatBenchmark.Db db = new RepeatBenchmark.Db();
    db.start();
    try {
      if (only == null || only.stream().anyMatch(m -> m.contains("Repeat") || m.contains("Replay"))) {
        new RepeatBenchmark.InboxIds().start(db);
        new RepeatBenchmark.ExecutorKeys().start(db);
      }
      Map<String, Op> cpu = methods(db, db.ds, only);
      System.out.printf("CPU per operation on the caller's thread, median of %d rounds of %d ops (%s)%n", rounds, ops,
          db.db.jdbcUrl().replaceAll("password=[^&]*", "password=..."));
      run(cpu, rounds, ops);
      RoundTrips trips = new RoundTrips(db.ds);
      Map<String, Op> counted = methods(db, trips, only);
      counted.remove("nothing");
      counted.remove("fingerprintOnly");
      System.out.println("Round trips per operation (counted on the connections, 200 ops each)");
      for (Map.Entry<String, Op> e : counted.entrySet()) {
        Meter m = new Meter(trips);
        while (m.ops < 200) {
          e.getValue().run(m);
        }
        System.out.printf("%-30s %6.3f%n", e.getKey(), (double) m.tripCount / m.ops);
      }
    } finally {
      db.stop();
    }
  }

  private static void run(Map<String, Op> methods, int rounds, int ops) throws Exception {
    Map<String, List<double[]>> results = new LinkedHashMap<>();
    for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
      List<Map.Entry<String, Op>> order = new ArrayList<>(methods.entrySet());
      if (round % 2 != 0) {
        java.util.Collections.reverse(order);
      }
      for (Map.Entry<String, Op> e : order) {
        Meter m = new Meter(null);
        Op op = e.getValue();
        // a sparse repeat's op runs SPARSE_EVERY new keys besides the one measured
        int n = e.getKey().contains("Sparse") ? Math.max(1, ops / SPARSE_EVERY) : ops;
        while (m.ops < n) {
          op.run(m);
        }
        if (round >= 0) {
          results.computeIfAbsent(e.getKey(), k -> new ArrayList<>())
              .add(new double[] {m.cpuNanos / 1000.0 / m.ops, (double) m.bytes / m.ops});
        }
      }
    }
    // The median, and the least round: on a shared (virtual) machine the other load only adds to a
    // thread's CPU time (cache misses, time stolen from the virtual CPU), so the least is the steadier.
    System.out.printf("%-30s %10s %8s %12s   %s%n", "method", "cpu us/op", "least", "bytes/op", "each round (cpu us/op)");
    results.forEach((name, r) -> {
      double[] cpu = r.stream().mapToDouble(x -> x[0]).sorted().toArray();
      double[] bytes = r.stream().mapToDouble(x -> x[1]).sorted().toArray();
      StringBuilder each = new StringBuilder();
      for (double[] x : r) {
        each.append(String.format("%.1f ", x[0]));
      }
      System.out.printf("%-30s %10.1f %8.1f %12.0f   %s%n", name, cpu[cpu.length / 2], cpu[0], bytes[bytes.length / 2], each);
    });
  }

  /** The methods, on guards built over {@code ds} (the pool itself, or a counting wrapper). */
  private static Map<String, Op> methods(RepeatBenchmark.Db db, DataSource ds, Set<String> only) {
    Idem idem = Idem.builder(ds).build();
    IdempotentExecutor executor = idem.executor().window(RepeatBenchmark.WINDOW).build();
    Inbox inbox = idem.inbox("bench-new").window(RepeatBenchmark.WINDOW).build();
    ThreadKeys keys = new ThreadKeys();
    keys.start();
    Map<String, Op> ops = new LinkedHashMap<>();
    ops.put("nothing", m -> m.measure(() -> {}));
    // what every idem call here includes and no yardstick does: the caller's fingerprint of its request
    ops.put("fingerprintOnly", m -> {
      String request = keys.newKey();
      m.measure(() -> fingerprint(request));
    });
    ops.put("barePkRead", m -> m.measure(() -> pkRead(ds, keys)));
    ops.put("bareEffect", m -> m.measure(() -> BareTransaction.run(ds, c -> pay(c, keys.newKey()))));
    // The statements form's own yardstick: the same jOOQ statement, rendered, bound and run by jOOQ
    // in a bare transaction (the statements form renders and binds it with jOOQ too).
    org.jooq.SQLDialect dialect = db.sql.mariadb() ? org.jooq.SQLDialect.MARIADB : org.jooq.SQLDialect.POSTGRES;
    ops.put("bareEffectJooq", m -> m.measure(() -> BareTransaction.run(ds,
        c -> org.jooq.impl.DSL.using(c, dialect).execute(payment(keys.newKey())))));
    // The callback forms' like-for-like yardsticks: a guard written by hand, whose claim must answer
    // before the effect runs too (three round trips: the claim, the payment, COMMIT), storing nothing
    // a replay needs; and the same keeping the fingerprint and the result (an UPDATE more).
    ops.put("naiveGuardNewKey", m -> {
      String key = keys.newKey();
      m.measure(() -> {
        try (Connection c = ds.getConnection()) {
          RepeatBenchmark.naiveGuard(c, db.sql, key, key);
        }
      });
    });
    ops.put("naiveGuardNewKeyStored", m -> {
      String key = keys.newKey();
      m.measure(() -> {
        try (Connection c = ds.getConnection()) {
          RepeatBenchmark.handRolled(c, db.sql.naiveStoredClaim(), key, java.util.HexFormat.of().parseHex(fingerprint(key).hex()),
              () -> pay(c, key));
        }
      });
    });
    ops.put("executorNewKeyCallback", m -> {
      String request = keys.newKey();
      m.measure(() -> executor.execute(IdempotencyKey.of("bench/new", request), fingerprint(request), Codec.utf8(),
          tx -> pay(tx.connection(), request)));
    });
    ops.put("executorNewKeyStatement", m -> {
      String request = keys.newKey();
      m.measure(() -> executor.execute(IdempotencyKey.of("bench/new", request), fingerprint(request), payment(request)));
    });
    ops.put("inboxNewKeyCallback", m -> {
      String id = keys.newKey();
      m.measure(() -> inbox.receive(id, tx -> {
        pay(tx.connection(), id);
      }));
    });
    ops.put("inboxNewKeyStatement", m -> {
      String id = keys.newKey();
      m.measure(() -> inbox.receive(id, payment(id)));
    });
    Cold<IdempotentExecutor> coldExecutor = new Cold<>(ds, i -> i.executor().window(RepeatBenchmark.WINDOW).build());
    ops.put("executorReplayCold", m -> {
      String request = RepeatBenchmark.executorKey(coldExecutor.next());
      IdempotentExecutor guard = coldExecutor.guard;
      m.measure(() -> replay(guard, request));
    });
    Cold<IdempotentExecutor> coldExecutorSt = new Cold<>(ds, i -> i.executor().window(RepeatBenchmark.WINDOW).build());
    ops.put("executorReplayColdStatement", m -> {
      String request = RepeatBenchmark.executorKey(coldExecutorSt.next());
      IdempotentExecutor guard = coldExecutorSt.guard;
      m.measure(() -> replayStatement(guard, request));
    });
    Cold<Inbox> coldInbox = new Cold<>(ds, i -> i.inbox(RepeatBenchmark.CONSUMER).window(RepeatBenchmark.WINDOW).build());
    ops.put("inboxRepeatCold", m -> {
      String id = RepeatBenchmark.inboxId(coldInbox.next());
      Inbox guard = coldInbox.guard;
      m.measure(() -> repeat(guard, id));
    });
    Cold<Inbox> coldInboxSt = new Cold<>(ds, i -> i.inbox(RepeatBenchmark.CONSUMER).window(RepeatBenchmark.WINDOW).build());
    ops.put("inboxRepeatColdStatement", m -> {
      String id = RepeatBenchmark.inboxId(coldInboxSt.next());
      Inbox guard = coldInboxSt.guard;
      m.measure(() -> RepeatBenchmark.replayed(guard.receive(id, mustNotRun(id)), id));
    });
    // A cold repeat among new keys: SPARSE_EVERY new keys (not measured), then the repeat.
    Cold<IdempotentExecutor> sparseExecutor = new Cold<>(ds, i -> i.executor().window(RepeatBenchmark.WINDOW).build());
    ops.put("executorSparseRepeat", m -> {
      String request = RepeatBenchmark.executorKey(sparseExecutor.next());
      IdempotentExecutor guard = sparseExecutor.guard;
      for (int i = 0; i < SPARSE_EVERY; i++) {
        String fresh = keys.newKey();
        guard.execute(IdempotencyKey.of("bench/new", fresh), fingerprint(fresh), Codec.utf8(), tx -> pay(tx.connection(), fresh));
      }
      m.measure(() -> replay(guard, request));
    });
    Cold<IdempotentExecutor> sparseExecutorSt = new Cold<>(ds, i -> i.executor().window(RepeatBenchmark.WINDOW).build());
    ops.put("executorSparseRepeatStatement", m -> {
      String request = RepeatBenchmark.executorKey(sparseExecutorSt.next());
      IdempotentExecutor guard = sparseExecutorSt.guard;
      for (int i = 0; i < SPARSE_EVERY; i++) {
        String fresh = keys.newKey();
        guard.execute(IdempotencyKey.of("bench/new", fresh), fingerprint(fresh), payment(fresh));
      }
      m.measure(() -> replayStatement(guard, request));
    });
    Cold<Inbox> sparseInbox = new Cold<>(ds, i -> i.inbox(RepeatBenchmark.CONSUMER).window(RepeatBenchmark.WINDOW).build());
    ops.put("inboxSparseRepeat", m -> {
      String id = RepeatBenchmark.inboxId(sparseInbox.next());
      Inbox guard = sparseInbox.guard;
      for (int i = 0; i < SPARSE_EVERY; i++) {
        String fresh = keys.newKey();
        guard.receive(fresh, tx -> {
          pay(tx.connection(), fresh);
        });
      }
      m.measure(() -> repeat(guard, id));
    });
    if (only != null) {
      ops.keySet().retainAll(only);
    }
    return ops;
  }

  /** A cold repeat of {@code request} through the executor's callback form, checked: its stored value, its effect not run. */
  private static void replay(IdempotentExecutor guard, String request) {
    RepeatBenchmark.replayedValue(guard.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + request);
    }), request);
  }

  /** The same through the statements form. */
  private static void replayStatement(IdempotentExecutor guard, String request) {
    RepeatBenchmark.replayed(guard.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), mustNotRun(request)), request);
  }

  /** A cold repeat of message {@code id} through the inbox's callback form, checked: its effect not run. */
  private static void repeat(Inbox guard, String id) {
    RepeatBenchmark.replayed(guard.receive(id, tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + id);
    }), id);
  }

  private static void pkRead(DataSource ds, ThreadKeys keys) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT request, amount FROM payments WHERE id = ?")) {
      ps.setLong(1, 1 + keys.nextIndex(RepeatBenchmark.READ_ROWS));
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        rs.getString(1);
      }
    }
  }

  /**
   * A guard that never saw the keys it is given ({@link RepeatBenchmark}'s cold state, on any
   * DataSource): a fresh {@link Idem} and guard for each pass over the {@value RepeatBenchmark#IDS} keys.
   */
  static final class Cold<G> {
    private final DataSource ds;
    private final java.util.function.Function<Idem, G> make;
    private final int offset = java.util.concurrent.ThreadLocalRandom.current().nextInt(RepeatBenchmark.IDS);
    private int next = RepeatBenchmark.IDS;
    G guard;

    Cold(DataSource ds, java.util.function.Function<Idem, G> make) {
      this.ds = ds;
      this.make = make;
    }

    /** The index of the next key, never seen by {@link #guard} (which may be new). */
    int next() {
      if (next == RepeatBenchmark.IDS) {
        guard = make.apply(Idem.builder(ds).build());
        next = 0;
      }
      return (offset + next++) % RepeatBenchmark.IDS;
    }
  }

}
