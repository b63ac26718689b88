package dev.idem.spring.boot;

import java.time.Duration;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deletes keys and inbox ids past their window, for every executor, inbox and Idempotency-Key
 * filter bean, every {@code
 * idem.expiry.interval}, on one daemon thread of its own. Expiry is decided by the database clock
 * and batched by each tool; several instances running it at once delete each row once. In the
 * partitioned layout each run also creates partitions ahead and drops old ones whole ({@code
 * Operations.maintainPartitions()}).
 */
final class ExpirySchedule extends DaemonSchedule {
  private static final Logger LOG = LoggerFactory.getLogger(ExpirySchedule.class);
  private final Supplier<List<LongSupplier>> expiries;
  private final Duration interval;

  /** {@code expiries}: each tool's {@code expire()}, asked for anew at every run (beans may be lazy). */
  ExpirySchedule(Supplier<List<LongSupplier>> expiries, Duration interval) {
    super("idem-expiry", positive(interval), interval);
    this.expiries = expiries;
    this.interval = interval;
  }

  private static Duration positive(Duration interval) {
    if (interval == null || interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("idem.expiry.interval must be positive, was " + interval);
    }
    return interval;
  }

  /** One pass over every tool; returns the rows deleted. */
  long runOnce() {
    long n = 0;
    for (LongSupplier expire : expiries.get()) {
      n += expire.getAsLong();
    }
    return n;
  }

  @Override
  void scheduledRun() {
    try {
      runOnce();
    } catch (RuntimeException e) {
      LOG.warn("idem expiry failed; trying again in {}", interval, e);
    }
  }
}
