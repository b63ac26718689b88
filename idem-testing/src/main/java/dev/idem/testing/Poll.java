package dev.idem.testing;

import java.time.Duration;
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
}
