package dev.idem.jdbc.internal;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The share of a guard's recent calls that were recognised repeats: a hint, like {@link
 * RecentKeys}, that decides which path a call tries first, never what it is answered. Not an API.
 *
 * <p>A repeat that reaches an instance which never saw its key (another replica, a consumer after
 * a rebalance, a redelivery storm) is one round trip if read first, two if claimed first; a new key
 * is the other way round. So a guard reads first while most of its calls lately were repeats.
 *
 * <p>An exponentially weighted average of the outcomes (1 a repeat, 0 anything else), each new one
 * weighing 1/16 (so about the last 16 calls count), in units of 2^-16. Without locks: two calls
 * that record at once may lose one's step, which a hint can afford.
 */
public final class RepeatShare {
  private static final int ONE = 1 << 16;
  private static final int WEIGHT_SHIFT = 4;

  private final AtomicInteger share = new AtomicInteger();

  public void record(boolean repeat) {
    int s = share.getOpaque();
    share.setOpaque(s + (((repeat ? ONE : 0) - s) >> WEIGHT_SHIFT));
  }

  /** True while more than half the recent calls were repeats: a read first then saves more than it costs. */
  public boolean mostlyRepeats() {
    return share.getOpaque() > ONE / 2;
  }
}
