package dev.idem.spring.boot;

import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.springframework.context.SmartLifecycle;

/**
 * A task run with the context, on one daemon thread of its own, after {@code initialDelay} and then
 * {@code delay} after the end of each run (runs never overlap); stopped with the context (the
 * thread interrupted, a run in progress waited for up to 5 s). The task handles its own failures:
 * one that escapes ends the schedule, as {@link ScheduledExecutorService} does.
 */
abstract class DaemonSchedule implements SmartLifecycle {
  private final String threadName;
  private final Duration initialDelay;
  private final Duration delay;
  private ScheduledExecutorService scheduler;

  DaemonSchedule(String threadName, Duration initialDelay, Duration delay) {
    this.threadName = threadName;
    this.initialDelay = initialDelay;
    this.delay = delay;
  }

  /** One run of the task. */
  abstract void scheduledRun();

  @Override
  public synchronized void start() {
    scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
    scheduler.scheduleWithFixedDelay(this::scheduledRun, initialDelay.toMillis(), delay.toMillis(), TimeUnit.MILLISECONDS);
  }

  @Override
  public synchronized void stop() {
    if (scheduler != null) {
      scheduler.shutdownNow();
      try {
        scheduler.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      scheduler = null;
    }
  }

  @Override
  public synchronized boolean isRunning() {
    return scheduler != null;
  }
}
