package dev.idem.micrometer;

import dev.idem.jdbc.outbox.Outbox;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The outbox's backlog as gauges: {@value #PENDING} (messages committed and not yet sent) and
 * {@value #PARKED} (messages that failed {@code maxAttempts} times and wait for a redrive; alert
 * when above zero, since a parked message also stops its aggregate key).
 *
 * <p>A scrape never queries the database: the gauges read values that a daemon thread of this
 * object refreshes every {@code interval} (default 30 s) with {@link
 * Outbox#countPending()} and {@link Outbox#countParked()}. The first refresh runs at once.
 *
 * <p>Guarantees: each gauge shows the result of the last successful refresh, a snapshot at most
 * {@code interval} (plus the time a count takes) old; before the first success it shows NaN, not a
 * made-up zero. A refresh that fails (database down, pool exhausted) is logged at WARN on logger
 * {@code dev.idem.metrics} and keeps the last values, so a flat line during an outage means "not
 * known since", not "unchanged". {@link #close()} stops the thread and removes the gauges.
 *
 * <p>Does not guarantee: exact counts (transactions still open are not counted; see {@link
 * Outbox#countPending()}), nor an age of the oldest pending message, which {@link Outbox} does not
 * offer. {@code countParked} scans the outbox table: keep the interval in tens of seconds.
 */
public final class OutboxGauges implements AutoCloseable {

  /** Gauge of pending outbox messages. */
  public static final String PENDING = "idem.outbox.pending";
  /** Gauge of parked outbox messages. */
  public static final String PARKED = "idem.outbox.parked";
  /** The refresh interval of {@link #start(Outbox, MeterRegistry)}: 30 seconds. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofSeconds(30);
  /** The longest refresh interval accepted: one day. */
  public static final Duration MAX_INTERVAL = Duration.ofDays(1);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.metrics");

  private final Outbox outbox;
  private final MeterRegistry registry;
  private final List<Gauge> gauges = new CopyOnWriteArrayList<>();
  private final ScheduledExecutorService scheduler;
  // Written by the refresh thread (or a caller of refresh()), read by scrapes.
  private volatile double pending = Double.NaN;
  private volatile double parked = Double.NaN;

  private OutboxGauges(Outbox outbox, MeterRegistry registry) {
    this.outbox = outbox;
    this.registry = registry;
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "idem-outbox-gauges");
      t.setDaemon(true);
      return t;
    });
  }

  private void begin(Duration interval) {
    gauges.add(Gauge.builder(PENDING, this, g -> g.pending).description("Outbox messages committed and not yet sent").register(registry));
    gauges.add(Gauge.builder(PARKED, this, g -> g.parked).description("Outbox messages parked until a redrive").register(registry));
    scheduler.scheduleWithFixedDelay(this::refresh, 0, interval.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** {@link #start(Outbox, MeterRegistry, Duration)} every {@link #DEFAULT_INTERVAL} (30 s). */
  public static OutboxGauges start(Outbox outbox, MeterRegistry registry) {
    return start(outbox, registry, DEFAULT_INTERVAL);
  }

  /**
   * Registers the gauges on {@code registry} and starts refreshing them every {@code interval}, the
   * first time at once. Close it (or let the application context do so) to stop. One per registry:
   * a second one on the same registry would find the gauges taken and show nothing of its own.
   *
   * @throws IllegalArgumentException if an argument is null, or {@code interval} is not positive or
   *     longer than {@link #MAX_INTERVAL}
   */
  public static OutboxGauges start(Outbox outbox, MeterRegistry registry, Duration interval) {
    if (outbox == null || registry == null || interval == null) {
      throw new IllegalArgumentException("outbox, registry and interval must not be null");
    }
    if (interval.isNegative() || interval.isZero() || interval.compareTo(MAX_INTERVAL) > 0) {
      throw new IllegalArgumentException("interval must be positive and at most " + MAX_INTERVAL + ", got " + interval);
    }
    OutboxGauges gauges = new OutboxGauges(outbox, registry);
    gauges.begin(interval);
    return gauges;
  }

  /**
   * Counts now, on the calling thread, and updates the gauges; what the schedule calls. Safe to call
   * at any time, concurrently with the schedule.
   *
   * @return true if both counts succeeded; false if one failed, which is logged and leaves both
   *     gauges at their last values
   */
  public boolean refresh() {
    try {
      long p = outbox.countPending();
      long x = outbox.countParked();
      pending = p;
      parked = x;
      return true;
    } catch (RuntimeException e) {
      LOG.warn("could not count the outbox's pending and parked messages; the gauges keep their last values: {}", e.toString());
      return false;
    }
  }

  /** Stops the refresh thread (without waiting for a count in progress) and removes the gauges from the registry. Idempotent. */
  @Override
  public void close() {
    scheduler.shutdownNow();
    gauges.forEach(registry::remove);
  }
}
