package dev.idem.benchmarks;

import com.sun.management.OperatingSystemMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The ratios of {@link ExecutorBenchmark} or {@link InboxBenchmark} on a machine whose speed
 * drifts: JMH measures one method after the other, so a load (or a slower disk flush) that comes
 * and goes lands on one side of a ratio. This runs the same benchmark methods on the same state
 * (one pool, 8 threads) in alternating short slices, every other round in reverse order, so each
 * ratio compares throughputs measured under the same conditions (a fixed order, like JMH's
 * alphabetical one, runs the replay right after the inserts and charges it for their autovacuum). Not a replacement for the JMH figures, a check on their ratios. Beside
 * each throughput it prints the CPU time one operation cost this JVM and the rest of the machine
 * (from /proc/stat: the PostgreSQL backends, when the database runs here).
 *
 * <pre>java [-Dthreads=8] [-DwarmupMillis=...] -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.InterleavedRatios [executor|inbox|repeat|batch] [rounds] [sliceMillis] [method,method...]</pre>
 *
 * <p>{@code batch} runs {@link InboxBatchBenchmark}'s methods (a {@code batch...} or {@code
 * handRolledBatch...} operation is a poll of {@value InboxBatchBenchmark#BATCH} messages; the
 * figures are messages a second), with each batch form's ratio to the best peer and {@code
 * batchNew}'s to {@code handRolledBatchNew}.
 *
 * <p>{@code repeat} runs {@link RepeatBenchmark}'s methods: repeats from an instance that never saw
 * the id (each thread of each slice builds its own fresh Idem for them), warm repeats, the peers
 * (Camel, Spring Integration), the hand-rolled guard and the new-key forms, on one pool.
 *
 * <p>Each runs on PostgreSQL or MariaDB, as {@link dev.idem.testing.TestDatabase#newDatabase} picks
 * it ({@code IDEM_JDBC_URL=jdbc:mariadb://127.0.0.1:3306/test?user=root}, or {@code
 * -DIDEM_TEST_DATABASE=mariadb} for the local server). On MariaDB "the rest of the machine" is
 * mostly the mariadbd threads.
 */
public final class InterleavedRatios {
  /** Threads per slice: 8, or the system property {@code threads} ({@code -Dthreads=1}). */
  private static final int THREADS = Integer.getInteger("threads", 8);
  /**
   * Milliseconds each method runs, unmeasured, before the rounds: half a slice, or the system
   * property {@code warmupMillis}. The JIT compiler runs on the same two cores as the database,
   * and a method still being compiled when the rounds start pays for it in its ratio.
   */
  private static final Integer WARMUP_MILLIS = Integer.getInteger("warmupMillis");
  /** The methods to run (a fourth argument, comma-separated), or null for all. */
  private static Set<String> only;

  private InterleavedRatios() {}

  /** One operation of a benchmark method, on a thread's own state. */
  @FunctionalInterface
  interface Op {
    void run() throws Exception;
  }

  /** Makes the operation of one thread: each thread gets its own benchmark-local state. */
  @FunctionalInterface
  interface PerThread {
    Op make();
  }

  public static void main(String[] args) throws Exception {
    String which = args.length > 0 ? args[0] : "executor";
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    int sliceMillis = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
    only = args.length > 3 ? Set.of(args[3].split(",")) : null;
    switch (which) {
      case "executor" -> executor(rounds, sliceMillis);
      case "inbox" -> inbox(rounds, sliceMillis);
      case "repeat" -> repeat(rounds, sliceMillis);
      case "batch" -> batch(rounds, sliceMillis);
      default -> throw new IllegalArgumentException("first argument: executor, inbox, repeat or batch, was " + which);
    }
  }

  private static void executor(int rounds, int sliceMillis) throws Exception {
    ExecutorBenchmark bench = new ExecutorBenchmark();
    ExecutorBenchmark.Shared shared = new ExecutorBenchmark.Shared();
    shared.start();
    try {
      Map<String, PerThread> ops = new LinkedHashMap<>();
      ops.put("bareEffect", () -> op(l -> bench.bareEffect(shared, l)));
      ops.put("executorNewKey", () -> op(l -> bench.executorNewKey(shared, l)));
      ops.put("executorNewKeyCallback", () -> op(l -> bench.executorNewKeyCallback(shared, l)));
      ops.put("executorNewKeyNoResult", () -> op(l -> bench.executorNewKeyNoResult(shared, l)));
      ops.put("executorReplay", () -> op(l -> bench.executorReplay(shared, l)));
      ops.put("barePkRead", () -> op(l -> bench.barePkRead(shared, l)));
      ops.put("naiveGuardNewKey", () -> op(l -> bench.naiveGuardNewKey(shared, l)));
      Map<String, Double> mean = measure(ops, rounds, sliceMillis);
      ratio("b/a ", mean, "executorNewKey", "bareEffect");
      ratio("b1/a", mean, "executorNewKeyCallback", "bareEffect");
      ratio("b'/a", mean, "executorNewKeyNoResult", "bareEffect");
      ratio("c/d ", mean, "executorReplay", "barePkRead");
      ratio("b1/naive", mean, "executorNewKeyCallback", "naiveGuardNewKey");
    } finally {
      shared.stop();
    }
  }

  private static void inbox(int rounds, int sliceMillis) throws Exception {
    InboxBenchmark bench = new InboxBenchmark();
    InboxBenchmark.Shared shared = new InboxBenchmark.Shared();
    shared.start();
    try {
      Map<String, PerThread> ops = new LinkedHashMap<>();
      ops.put("bareEffect", () -> op(l -> bench.bareEffect(shared, l)));
      ops.put("inboxReceive", () -> op(l -> bench.inboxReceive(shared, l)));
      ops.put("inboxReceiveStatement", () -> op(l -> bench.inboxReceiveStatement(shared, l)));
      Map<String, Double> mean = measure(ops, rounds, sliceMillis);
      ratio("inbox/bare         ", mean, "inboxReceive", "bareEffect");
      ratio("inboxStatement/bare", mean, "inboxReceiveStatement", "bareEffect");
    } finally {
      shared.stop();
    }
  }

  private static void repeat(int rounds, int sliceMillis) throws Exception {
    RepeatBenchmark b = new RepeatBenchmark();
    RepeatBenchmark.Db db = new RepeatBenchmark.Db();
    db.start();
    RepeatBenchmark.Camel camel = new RepeatBenchmark.Camel();
    RepeatBenchmark.SpringIntegration si = new RepeatBenchmark.SpringIntegration();
    try {
      RepeatBenchmark.InboxIds inboxIds = new RepeatBenchmark.InboxIds();
      inboxIds.start(db);
      RepeatBenchmark.ExecutorKeys executorKeys = new RepeatBenchmark.ExecutorKeys();
      executorKeys.start(db);
      RepeatBenchmark.WarmInbox warmInbox = new RepeatBenchmark.WarmInbox();
      warmInbox.start(db);
      RepeatBenchmark.WarmExecutor warmExecutor = new RepeatBenchmark.WarmExecutor();
      warmExecutor.start(db);
      camel.start(db);
      si.start(db);
      RepeatBenchmark.Naive naive = new RepeatBenchmark.Naive();
      naive.start(db);
      RepeatBenchmark.ExecutorState executor = new RepeatBenchmark.ExecutorState();
      executor.start(db);
      RepeatBenchmark.InboxState inbox = new RepeatBenchmark.InboxState();
      inbox.start(db);

      Map<String, PerThread> ops = new LinkedHashMap<>();
      ops.put("barePkRead", () -> op(l -> b.barePkRead(db, l)));
      ops.put("inboxRepeatCold", () -> {
        RepeatBenchmark.ColdInbox cold = new RepeatBenchmark.ColdInbox();
        cold.start(db, inboxIds);
        return () -> b.inboxRepeatCold(cold);
      });
      ops.put("inboxRepeatColdStatement", () -> {
        RepeatBenchmark.ColdInbox cold = new RepeatBenchmark.ColdInbox();
        cold.start(db, inboxIds);
        return () -> b.inboxRepeatColdStatement(cold);
      });
      ops.put("inboxRepeatWarm", () -> op(l -> b.inboxRepeatWarm(warmInbox, l)));
      ops.put("executorReplayCold", () -> {
        RepeatBenchmark.ColdExecutor cold = new RepeatBenchmark.ColdExecutor();
        cold.start(db, executorKeys);
        return () -> b.executorReplayCold(cold);
      });
      ops.put("executorReplayColdStatement", () -> {
        RepeatBenchmark.ColdExecutor cold = new RepeatBenchmark.ColdExecutor();
        cold.start(db, executorKeys);
        return () -> b.executorReplayColdStatement(cold);
      });
      ops.put("executorReplayWarm", () -> op(l -> b.executorReplayWarm(warmExecutor, l)));
      for (String mix : new String[] {"executorMixed10", "executorMixed90"}) {
        ops.put(mix, () -> {
          RepeatBenchmark.MixedExecutor mixed = new RepeatBenchmark.MixedExecutor();
          mixed.start(db, executorKeys);
          return mix.equals("executorMixed10") ? () -> b.executorMixed10(mixed) : () -> b.executorMixed90(mixed);
        });
      }
      ops.put("camelRepeatCold", () -> op(l -> b.camelRepeatCold(camel, l)));
      ops.put("springIntegrationRepeatCold", () -> op(l -> b.springIntegrationRepeatCold(si, l)));
      ops.put("naiveGuardRepeat", () -> op(l -> b.naiveGuardRepeat(db, naive, l)));
      ops.put("bareEffect", () -> op(l -> b.bareEffect(db, l)));
      ops.put("executorNewKeyStatement", () -> op(l -> b.executorNewKeyStatement(executor, l)));
      ops.put("executorNewKeyCallback", () -> op(l -> b.executorNewKeyCallback(executor, l)));
      ops.put("inboxNewKeyStatement", () -> op(l -> b.inboxNewKeyStatement(inbox, l)));
      ops.put("inboxNewKeyCallback", () -> op(l -> b.inboxNewKeyCallback(inbox, l)));
      ops.put("naiveGuardNewKey", () -> op(l -> b.naiveGuardNewKey(db, l)));
      ops.put("naiveGuardNewKeyStored", () -> op(l -> b.naiveGuardNewKeyStored(db, l)));
      Map<String, Double> mean = measure(ops, rounds, sliceMillis);
      for (String guard : new String[] {"inboxRepeatCold", "inboxRepeatColdStatement", "inboxRepeatWarm", "executorReplayCold",
          "executorReplayColdStatement", "executorReplayWarm", "camelRepeatCold", "springIntegrationRepeatCold", "naiveGuardRepeat"}) {
        ratio(String.format("%-28s / barePkRead                 ", guard), mean, guard, "barePkRead");
      }
      for (String guard : new String[] {"inboxRepeatCold", "inboxRepeatColdStatement", "inboxRepeatWarm", "executorReplayCold",
          "executorReplayColdStatement", "executorReplayWarm"}) {
        ratio(String.format("%-28s / camelRepeatCold            ", guard), mean, guard, "camelRepeatCold");
        ratio(String.format("%-28s / springIntegrationRepeatCold", guard), mean, guard, "springIntegrationRepeatCold");
      }
      ratio("executorNewKeyStatement      / bareEffect                 ", mean, "executorNewKeyStatement", "bareEffect");
      ratio("inboxNewKeyStatement         / bareEffect                 ", mean, "inboxNewKeyStatement", "bareEffect");
      ratio("executorNewKeyCallback       / naiveGuardNewKey           ", mean, "executorNewKeyCallback", "naiveGuardNewKey");
      ratio("inboxNewKeyCallback          / naiveGuardNewKey           ", mean, "inboxNewKeyCallback", "naiveGuardNewKey");
      ratio("executorNewKeyCallback       / naiveGuardNewKeyStored     ", mean, "executorNewKeyCallback", "naiveGuardNewKeyStored");
      ratio("naiveGuardNewKeyStored       / naiveGuardNewKey           ", mean, "naiveGuardNewKeyStored", "naiveGuardNewKey");
      // A mix's throughput against the same mix of the pure figures (time per op weighted by share):
      // below 1, the mix pays for its reads (new keys read first) or misses repeats (claimed first).
      mixRatio("executorMixed10", 0.1, mean);
      mixRatio("executorMixed90", 0.9, mean);
    } finally {
      if (camel.repository != null) {
        camel.stop();
      }
      if (si.store != null) {
        si.stop();
      }
      db.stop();
    }
  }

  /** {@link InboxBatchBenchmark}: a batch method's op is a poll of 500 messages, the others' one message; compared per message. */
  private static void batch(int rounds, int sliceMillis) throws Exception {
    InboxBatchBenchmark b = new InboxBatchBenchmark();
    InboxBatchBenchmark.Guards g = new InboxBatchBenchmark.Guards();
    g.start();
    try {
      Map<String, PerThread> ops = new LinkedHashMap<>();
      ops.put("batchNew", () -> op(l -> b.batchNew(g, l)));
      ops.put("handRolledBatchNew", () -> op(l -> b.handRolledBatchNew(g, l)));
      ops.put("receiveNew", () -> op(l -> b.receiveNew(g, l)));
      ops.put("camelNew", () -> op(l -> b.camelNew(g, l)));
      ops.put("springIntegrationNew", () -> op(l -> b.springIntegrationNew(g, l)));
      ops.put("batchReplay", () -> op(l -> b.batchReplay(g, l)));
      ops.put("receiveReplay", () -> op(l -> b.receiveReplay(g, l)));
      ops.put("camelReplay", () -> op(l -> b.camelReplay(g, l)));
      ops.put("springIntegrationReplay", () -> op(l -> b.springIntegrationReplay(g, l)));
      Map<String, Double> mean = measure(ops, rounds, sliceMillis);
      mean.replaceAll((name, perOp) -> name.startsWith("batch") || name.startsWith("handRolledBatch")
          ? perOp * InboxBatchBenchmark.BATCH : perOp);
      mean.forEach((name, messages) -> System.out.printf("%-28s %10.0f messages/s%n", name, messages));
      for (String kind : new String[] {"New", "Replay"}) {
        String best = bestPeer(mean, kind);
        ratio(String.format("%-14s / best peer (%s)", "batch" + kind, best), mean, "batch" + kind, best);
        ratio(String.format("%-14s / %s", "batch" + kind, "receive" + kind), mean, "batch" + kind, "receive" + kind);
      }
      ratio("batchNew       / handRolledBatchNew", mean, "batchNew", "handRolledBatchNew");
      ratio("handRolledBatchNew / best peer", mean, "handRolledBatchNew", bestPeer(mean, "New"));
    } finally {
      g.stop();
    }
  }

  /** The faster of the batch peers' methods for {@code kind} ({@code "New"} or {@code "Replay"}). */
  private static String bestPeer(Map<String, Double> mean, String kind) {
    return mean.getOrDefault("camel" + kind, 0.0) >= mean.getOrDefault("springIntegration" + kind, 0.0)
        ? "camel" + kind : "springIntegration" + kind;
  }

  @FunctionalInterface
  interface OnThreadKeys {
    void run(ThreadKeys keys) throws Exception;
  }

  /** A benchmark method bound to a fresh thread's keys. */
  private static Op op(OnThreadKeys op) {
    ThreadKeys keys = new ThreadKeys();
    keys.start();
    return () -> op.run(keys);
  }

  /**
   * A warm-up slice of each, then {@code rounds} rounds of one slice each, every other round in
   * reverse order; the mean ops/s of each.
   */
  private static Map<String, Double> measure(Map<String, PerThread> all, int rounds, int sliceMillis) throws InterruptedException {
    Map<String, PerThread> ops = new LinkedHashMap<>(all);
    if (only != null) {
      ops.keySet().retainAll(only);
    }
    for (PerThread op : ops.values()) {
      slice(op, WARMUP_MILLIS != null ? WARMUP_MILLIS : sliceMillis / 2);
    }
    Map<String, Double> total = new LinkedHashMap<>();
    Map<String, CpuUse> cpu = new LinkedHashMap<>();
    List<Map.Entry<String, PerThread>> forward = new ArrayList<>(ops.entrySet());
    List<Map.Entry<String, PerThread>> backward = new ArrayList<>(forward);
    Collections.reverse(backward);
    for (int round = 0; round < rounds; round++) {
      // Every other round in reverse: a slice pays for the background work (autovacuum, WAL
      // writes) that the slice before it left behind, so a fixed order would charge the reads
      // that follow the inserts for the inserts' clean-up. Reversed, each method follows each
      // neighbour equally often.
      for (Map.Entry<String, PerThread> e : round % 2 == 0 ? forward : backward) {
        CpuUse before = CpuUse.now();
        Slice s = slice(e.getValue(), sliceMillis);
        total.merge(e.getKey(), s.count / s.seconds, Double::sum);
        cpu.merge(e.getKey(), CpuUse.now().minus(before).per(s.count), CpuUse::plus);
      }
    }
    Map<String, Double> mean = new LinkedHashMap<>();
    total.forEach((name, sum) -> mean.put(name, sum / rounds));
    mean.forEach((name, opsPerSecond) -> {
      CpuUse c = cpu.get(name);
      System.out.printf("%-28s %10.0f ops/s   cpu per op: this JVM %6.1f us, rest of machine %6.1f us%n",
          name, opsPerSecond, c.jvmMicros / rounds, c.otherMicros / rounds);
    });
    return mean;
  }

  private static void mixRatio(String mix, double repeats, Map<String, Double> mean) {
    Double newKey = mean.get("executorNewKeyCallback");
    Double repeat = mean.get("executorReplayCold");
    if (mean.containsKey(mix) && newKey != null && repeat != null) {
      double pure = 1 / (repeats / repeat + (1 - repeats) / newKey);
      System.out.printf("%-28s / the same mix of executorNewKeyCallback and executorReplayCold = %.2f (of %.0f ops/s)%n",
          mix, mean.get(mix) / pure, pure);
    }
  }

  private static void ratio(String label, Map<String, Double> mean, String of, String to) {
    if (!mean.containsKey(of) || !mean.containsKey(to)) {
      return;
    }
    System.out.printf("%s = %.2f%n", label, mean.get(of) / mean.get(to));
  }

  private record Slice(long count, double seconds) {}

  /**
   * CPU time spent by this JVM (the client: pool, driver, idem) and by the rest of the machine
   * (mostly the PostgreSQL backends, when it runs here), from /proc/stat; per operation once divided.
   */
  private record CpuUse(double jvmMicros, double otherMicros) {
    static CpuUse now() {
      double jvm = ((OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1000.0;
      double busy = 0;
      try {
        String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
        // user nice system idle iowait irq softirq steal: busy is all but idle and iowait
        for (int i = 1; i <= 8; i++) {
          if (i != 4 && i != 5) {
            busy += Long.parseLong(f[i]);
          }
        }
      } catch (IOException | RuntimeException e) {
        return new CpuUse(jvm, Double.NaN);
      }
      // USER_HZ is 100 on Linux: a jiffy is 10 ms
      return new CpuUse(jvm, busy * 10_000 - jvm);
    }

    CpuUse minus(CpuUse o) {
      return new CpuUse(jvmMicros - o.jvmMicros, otherMicros - o.otherMicros);
    }

    CpuUse per(long ops) {
      return new CpuUse(jvmMicros / ops, otherMicros / ops);
    }

    CpuUse plus(CpuUse o) {
      return new CpuUse(jvmMicros + o.jvmMicros, otherMicros + o.otherMicros);
    }
  }

  /** Runs {@code op} on {@value #THREADS} threads for {@code millis} and returns what it did. */
  private static Slice slice(PerThread op, int millis) throws InterruptedException {
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    Thread[] threads = new Thread[THREADS];
    for (int t = 0; t < THREADS; t++) {
      Op mine = op.make();
      threads[t] = new Thread(() -> {
        try {
          while (!stop.get()) {
            mine.run();
            done.incrementAndGet();
          }
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      threads[t].start();
    }
    long start = System.nanoTime();
    Thread.sleep(millis);
    long count = done.get();
    double seconds = (System.nanoTime() - start) / 1e9;
    stop.set(true);
    for (Thread thread : threads) {
      thread.join();
    }
    return new Slice(count, seconds);
  }
}
