package dev.idem.internal;

import java.time.Duration;

/** The bounded stop of a background loop, shared by the relay and the Kafka consumer loop. Not an API. */
public final class Stopping {
  private Stopping() {}

  /**
   * Waits four fifths of {@code timeout} for {@code loop} to end on its own (the work in progress
   * finishing), then runs {@code cutShort} (an interrupt, a wake-up) and waits the last fifth: the
   * whole stays within {@code timeout}, so a hung loop never holds an application's shutdown
   * longer than configured.
   *
   * @return whether the loop ended
   */
  public static boolean awaitEnd(Thread loop, Duration timeout, Runnable cutShort) throws InterruptedException {
    long total = timeout.toMillis();
    loop.join(Math.max(1, total * 4 / 5));
    if (loop.isAlive()) {
      cutShort.run();
      loop.join(Math.max(1, total / 5));
    }
    return !loop.isAlive();
  }
}
