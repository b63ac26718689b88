package dev.idem.jdbc.tx;

import dev.idem.internal.base.Require;
import java.time.Duration;

/**
 * The one budget for running a transaction again after PostgreSQL refused it for a reason that a
 * new attempt can clear: a serialization failure ({@code 40001}), a deadlock ({@code 40P01}) or
 * the server out of memory ({@code 53200}). A transaction idem owns that failed so after your
 * callback ran is run again, callback and all, until it has run {@link #maxRuns} times; between
 * runs it waits an exponential back-off with full jitter, from {@link #firstBackoff} doubling up
 * to {@link #maxBackoff}.
 *
 * <p>So your callback runs at most {@code maxRuns} times for one call, never more: it must do
 * nothing outside the transaction that cannot be repeated. A run that failed before any of your
 * code ran (a guard's claim waited for another copy of the key, which then committed) does not
 * count: the next run answers from that copy's row; such runs are bounded apart (at most 10), with
 * the same back-off. idem's own statements (reads, an external call's claim and record) wait the
 * same back-off between tries.
 *
 * <p>A joined call (inside your transaction) is never retried by idem: only the owner of a
 * transaction can run it again, so the failure is thrown to you.
 *
 * @param maxRuns runs in all, 1 or more (1: never run again)
 * @param firstBackoff the wait before the second run (then doubled each time), zero or more
 * @param maxBackoff the longest wait between two runs, at least {@code firstBackoff}
 */
public record RetryBudget(int maxRuns, Duration firstBackoff, Duration maxBackoff) {

  /** 5 runs, waits of up to 10, 20, 40, 80 ms with full jitter: at most 150 ms of waiting in all. */
  public static final RetryBudget DEFAULT = new RetryBudget(5, Duration.ofMillis(10), Duration.ofMillis(80));

  /** One run: every such failure is thrown at once. */
  public static final RetryBudget NONE = new RetryBudget(1, Duration.ZERO, Duration.ZERO);

  /** @throws IllegalArgumentException naming the component that is out of range */
  public RetryBudget {
    Require.positive(maxRuns, "maxRuns");
    Require.notNegative(firstBackoff, "firstBackoff");
    Require.notNegative(maxBackoff, "maxBackoff");
    if (maxBackoff.compareTo(firstBackoff) < 0) {
      throw new IllegalArgumentException("maxBackoff (" + maxBackoff + ") must be at least firstBackoff (" + firstBackoff + ")");
    }
    Require.atMost(maxBackoff, Duration.ofMinutes(1), "maxBackoff", "a retry waits while holding the caller's thread");
  }
}
