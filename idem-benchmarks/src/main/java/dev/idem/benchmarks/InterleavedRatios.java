package dev.idem.benchmarks;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The ratios of {@link ExecutorBenchmark} on a machine that other work is loading: JMH measures one
 * method after the other, so a load that comes and goes lands on one side of a ratio. This runs
 * the same benchmark methods on the same state (one pool, 8 threads) in alternating short slices,
 * so each ratio compares throughputs measured under the same load. Not a replacement for the JMH
 * figures, a check on their ratios.
 *
 * <pre>java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.InterleavedRatios [rounds] [sliceMillis]</pre>
 */
public final class InterleavedRatios {
  private static final int THREADS = 8;

  private InterleavedRatios() {}

  @FunctionalInterface
  interface Op {
    void run(ExecutorBenchmark.Local local) throws Exception;
  }

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    int sliceMillis = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
    ExecutorBenchmark bench = new ExecutorBenchmark();
    ExecutorBenchmark.Shared shared = new ExecutorBenchmark.Shared();
    shared.start();
    try {
      Map<String, Op> ops = new LinkedHashMap<>();
      ops.put("bareEffect", l -> bench.bareEffect(shared, l));
      ops.put("executorNewKey", l -> bench.executorNewKey(shared, l));
      ops.put("executorNewKeyAtCommit", l -> bench.executorNewKeyAtCommit(shared, l));
      ops.put("executorNewKeyNoResult", l -> bench.executorNewKeyNoResult(shared, l));
      ops.put("executorReplay", l -> bench.executorReplay(shared, l));
      ops.put("barePkRead", l -> bench.barePkRead(shared, l));
      Map<String, Double> total = new LinkedHashMap<>();
      for (Op op : ops.values()) {
        slice(op, sliceMillis / 2); // warm up
      }
      for (int round = 0; round < rounds; round++) {
        for (Map.Entry<String, Op> e : ops.entrySet()) {
          total.merge(e.getKey(), slice(e.getValue(), sliceMillis), Double::sum);
        }
      }
      total.forEach((name, sum) -> System.out.printf("%-24s %10.0f ops/s%n", name, sum / rounds));
      System.out.printf("b/a  = %.2f%n", total.get("executorNewKey") / total.get("bareEffect"));
      System.out.printf("b2/a = %.2f%n", total.get("executorNewKeyAtCommit") / total.get("bareEffect"));
      System.out.printf("b'/a = %.2f%n", total.get("executorNewKeyNoResult") / total.get("bareEffect"));
      System.out.printf("c/d  = %.2f%n", total.get("executorReplay") / total.get("barePkRead"));
    } finally {
      shared.stop();
    }
  }

  /** Runs {@code op} on {@value #THREADS} threads for {@code millis} and returns its throughput. */
  private static double slice(Op op, int millis) throws InterruptedException {
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    Thread[] threads = new Thread[THREADS];
    for (int t = 0; t < THREADS; t++) {
      ExecutorBenchmark.Local local = new ExecutorBenchmark.Local();
      local.start();
      threads[t] = new Thread(() -> {
        try {
          while (!stop.get()) {
            op.run(local);
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
    return count / seconds;
  }
}
