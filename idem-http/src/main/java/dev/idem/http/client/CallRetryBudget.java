package dev.idem.http.client;

import java.time.Duration;
import java.util.Arrays;
import java.util.function.LongSupplier;

/**
 * How many retries the calls of one client may make, shared by all of them: at most {@code ratio}
 * of the first attempts made over the recent {@code window}, plus a small {@code floor}, so that
 * when a provider is down, retries add about 10% to the load instead of multiplying it. This is the
 * seed's "cap retries with a budget of about 10% of normal traffic": without it, every caller's
 * few retries add up, and a provider that is struggling gets several times its normal traffic at
 * the worst moment.
 *
 * <p>Not to be confused with {@code dev.idem.jdbc.tx.RetryBudget}, which bounds how often idem
 * runs one database transaction again after a serialization failure; this one bounds retries of
 * calls to another company, across all the calls that share it.
 *
 * <p>Guarantee: whenever a retry is allowed, the retries counted in the recent window, that one
 * included, are at most {@code floor + ratio * first attempts counted in the same window}. The
 * window is kept as ten slots of a tenth each, so "recent" means the last 0.9 to 1.0 windows. A
 * call that finds the budget spent is not retried: its failure (the last answer, or the last
 * exception) goes back to its caller at once, and is counted in {@link #refused()}.
 *
 * <p>Thread-safe; share one instance across every call to one provider (one instance per {@link
 * ProviderCalls} unless you pass the same one to several). The counters {@link #firstAttempts()},
 * {@link #retries()} and {@link #refused()} are totals since creation, for metrics.
 */
public final class CallRetryBudget {
  private static final int SLOTS = 10;

  private final double ratio;
  private final int floor;
  private final Duration window;
  private final long slotNanos;
  private final LongSupplier nanoTime;

  // guarded by this
  private final long[] slotOf = new long[SLOTS];
  private final long[] firstsIn = new long[SLOTS];
  private final long[] retriesIn = new long[SLOTS];
  private long firstAttempts;
  private long retries;
  private long refused;

  private CallRetryBudget(double ratio, int floor, Duration window, LongSupplier nanoTime) {
    if (!(ratio >= 0 && ratio <= 1)) {
      throw new IllegalArgumentException("ratio must be 0 to 1 (retries per first attempt), was " + ratio);
    }
    if (floor < 0) {
      throw new IllegalArgumentException("floor must not be negative, was " + floor);
    }
    if (window == null || window.compareTo(Duration.ofMillis(10)) < 0 || window.compareTo(Duration.ofHours(1)) > 0) {
      throw new IllegalArgumentException("window must be 10 ms to 1 hour, was " + window);
    }
    this.ratio = ratio;
    this.floor = floor;
    this.window = window;
    this.slotNanos = window.toNanos() / SLOTS;
    this.nanoTime = nanoTime;
    Arrays.fill(slotOf, Long.MIN_VALUE);
  }

  /**
   * A budget of {@code ratio} retries per first attempt over the recent {@code window}, plus
   * {@code floor} retries per window whatever the traffic (so a client with little traffic can
   * still retry).
   *
   * @param ratio 0 to 1, e.g. 0.1; 0 leaves only the floor
   * @param floor 0 or more retries per window allowed on top
   * @param window 10 ms to 1 hour
   * @throws IllegalArgumentException naming the value out of range
   */
  public static CallRetryBudget of(double ratio, int floor, Duration window) {
    return new CallRetryBudget(ratio, floor, window, System::nanoTime);
  }

  /** A new budget of 10% of first attempts over 10 s, plus 10 retries per 10 s. */
  public static CallRetryBudget standard() {
    return of(0.1, 10, Duration.ofSeconds(10));
  }

  /** For tests of the window: the given clock instead of {@link System#nanoTime()}. */
  static CallRetryBudget of(double ratio, int floor, Duration window, LongSupplier nanoTime) {
    return new CallRetryBudget(ratio, floor, window, nanoTime);
  }

  public double ratio() {
    return ratio;
  }

  public int floor() {
    return floor;
  }

  public Duration window() {
    return window;
  }

  /** First attempts counted since creation (one per call). */
  public synchronized long firstAttempts() {
    return firstAttempts;
  }

  /** Retries allowed since creation. */
  public synchronized long retries() {
    return retries;
  }

  /** Retries refused since creation because the budget was spent. */
  public synchronized long refused() {
    return refused;
  }

  /** Counts the first attempt of a call: it earns {@code ratio} of a retry for the window. */
  synchronized void firstAttempt() {
    int slot = current();
    firstsIn[slot]++;
    firstAttempts++;
  }

  /**
   * Takes one retry from the budget if the window has one left.
   *
   * @return false (and counts a refusal) when the budget is spent
   */
  synchronized boolean tryRetry() {
    int slot = current();
    long cur = slotOf[slot];
    long firsts = 0;
    long taken = 0;
    for (int i = 0; i < SLOTS; i++) {
      if (slotOf[i] > cur - SLOTS) {
        firsts += firstsIn[i];
        taken += retriesIn[i];
      }
    }
    if (taken + 1 > floor + ratio * firsts + 1e-9) {
      refused++;
      return false;
    }
    retriesIn[slot]++;
    retries++;
    return true;
  }

  /** The ring position of the current slot, cleared if it last held an older slot. */
  private int current() {
    long cur = Math.floorDiv(nanoTime.getAsLong(), slotNanos);
    int i = (int) Math.floorMod(cur, (long) SLOTS);
    if (slotOf[i] != cur) {
      slotOf[i] = cur;
      firstsIn[i] = 0;
      retriesIn[i] = 0;
    }
    return i;
  }

  @Override
  public synchronized String toString() {
    return "CallRetryBudget[ratio=" + ratio + ", floor=" + floor + ", window=" + window + ", firstAttempts="
        + firstAttempts + ", retries=" + retries + ", refused=" + refused + "]";
  }
}
