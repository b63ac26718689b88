package dev.idem.http;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A bounded wait made of pauses that double from a first to a longest one, holding only the calling
 * thread between looks (a look is a short read or claim, never a connection held through the
 * wait): a state reached soon is seen soon, and a long wait costs a few looks a second. Shared by
 * the filter's leader waiting on a key another instance runs and the status resource's {@code
 * Prefer: wait}.
 */
final class Pauses {
  private final long deadline;
  private final long longest;
  private long pause;

  /** Pauses from {@code first} doubling to {@code longest}, none past {@code bound} from now. */
  Pauses(Duration bound, Duration first, Duration longest) {
    this.deadline = System.nanoTime() + bound.toNanos();
    this.pause = first.toNanos();
    this.longest = longest.toNanos();
  }

  /**
   * Sleeps the next pause, cut at the bound; false, without sleeping, once the bound is reached, and
   * false if interrupted (the container is stopping: answer now, do not wait on), the interrupt kept.
   */
  boolean next() {
    long left = deadline - System.nanoTime();
    if (left <= 0) {
      return false;
    }
    try {
      TimeUnit.NANOSECONDS.sleep(Math.min(pause, left));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    pause = Math.min(pause * 2, longest);
    return true;
  }
}
