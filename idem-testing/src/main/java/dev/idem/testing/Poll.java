package dev.idem.testing;

import java.time.Duration;
import java.util.Arrays;
import java.util.function.BooleanSupplier;

/** Waits for a condition a test cannot be told about (a row another thread commits), with a bound. */
public final class Poll {
  /** The bound of {@link #until(String, BooleanSupplier)}: long enough for a loaded CI machine. */
  public static final Duration BOUND = Duration.ofSeconds(20);

  private Poll() {}

  /**
   * Returns once {@code condition} holds, checking every 10 ms.
   *
   * @throws AssertionError naming {@code what} if it does not hold within {@link #BOUND}
   */
  public static void until(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + BOUND.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("waited " + BOUND.toSeconds() + " s for " + what);
      }
      Thread.sleep(10);
    }
  }

  /**
   * How many threads are waiting (parked, sleeping or in {@code Object.wait}) inside {@code
   * method} of the class named {@code className}: how a test sees that copies it started have
   * reached a wait it cannot be told about, e.g. {@code ("dev.idem.http.InFlightRequests",
   * "admit")}. Count before starting them and compare, as other tests' threads may wait there too.
   */
  public static long threadsWaitingIn(String className, String method) {
    return Thread.getAllStackTraces().entrySet().stream()
        .filter(e -> (e.getKey().getState() == Thread.State.TIMED_WAITING || e.getKey().getState() == Thread.State.WAITING)
            && Arrays.stream(e.getValue()).anyMatch(f -> f.getClassName().equals(className) && f.getMethodName().equals(method)))
        .count();
  }
}
