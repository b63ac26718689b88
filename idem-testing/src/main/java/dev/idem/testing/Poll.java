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
    if (!within(BOUND, Duration.ofMillis(10), condition::getAsBoolean)) {
      throw new AssertionError("waited " + BOUND.toSeconds() + " s for " + what);
    }
  }

  /**
   * Returns once {@code condition} holds, checking every 10 ms: for a test whose claim is the
   * bound itself ("answers within a second of the database's return").
   *
   * @throws AssertionError naming {@code what} and {@code bound} if it does not hold within it
   * @throws IllegalArgumentException if {@code bound} is null or not positive
   */
  public static void until(String what, Duration bound, BooleanSupplier condition) throws InterruptedException {
    if (bound == null || bound.isNegative() || bound.isZero()) {
      throw new IllegalArgumentException("bound must be positive, was " + bound);
    }
    if (!within(bound, Duration.ofMillis(10), condition::getAsBoolean)) {
      throw new AssertionError("waited " + bound.toMillis() + " ms for " + what);
    }
  }

  /** A condition read by {@link #within}, which may fail as its source does (SQL, a broker). */
  @FunctionalInterface
  interface Check<X extends Exception> {
    boolean holds() throws X;
  }

  /**
   * Whether {@code condition} came to hold within {@code bound}, checked every {@code pause}: the
   * one bounded poll of this module, for callers that report a timeout rather than fail on it.
   */
  static <X extends Exception> boolean within(Duration bound, Duration pause, Check<X> condition)
      throws X, InterruptedException {
    long deadline = System.nanoTime() + bound.toNanos();
    while (!condition.holds()) {
      if (System.nanoTime() - deadline > 0) {
        return false;
      }
      Thread.sleep(pause.toMillis());
    }
    return true;
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
