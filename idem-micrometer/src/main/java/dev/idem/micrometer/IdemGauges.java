package dev.idem.micrometer;

import dev.idem.jdbc.ops.Operations;
import dev.idem.jdbc.ops.OutboxStats;
import dev.idem.jdbc.ops.UnknownOutcomes;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.TimeGauge;
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
 * What needs an operator, as gauges: the outbox's backlog ({@value #PENDING}, {@value #PARKED},
 * {@value #OLDEST_PENDING}) and the external calls whose outcome is unknown ({@value
 * #UNKNOWN_OUTCOMES}, {@value #OLDEST_UNKNOWN_OUTCOME}: calls whose lease ran out before a result
 * was recorded, waiting for a repeat with a resolver, or an operator).
 *
 * <p>A scrape never queries the database: the gauges read values that a daemon thread of this
 * object refreshes every {@code interval} (default 30 s) with {@link Operations#outboxStats()} and
 * {@link Operations#unknownOutcomes()}, one query each. The first refresh runs at once.
 *
 * <p>Guarantees: each gauge shows the result of the last successful refresh, a snapshot at most
 * {@code interval} (plus the time the queries take) old; before the first success it shows NaN,
 * not a made-up zero. A refresh that fails (database down, pool exhausted) is logged at WARN on
 * logger {@code dev.idem.metrics} and keeps the last values, so a flat line during an outage means
 * "not known since", not "unchanged". {@link #close()} stops the thread and removes the gauges.
 *
 * <p>Does not guarantee: exact counts (transactions still open are not counted). The queries scan
 * the outbox and key tables: keep the interval in tens of seconds.
 */
public final class IdemGauges implements AutoCloseable {

  /** Gauge of pending outbox messages. */
  public static final String PENDING = "idem.outbox.pending";
  /** Gauge of parked outbox messages. */
  public static final String PARKED = "idem.outbox.parked";
  /** Time gauge: age of the oldest pending outbox message (0 when none). */
  public static final String OLDEST_PENDING = "idem.outbox.oldest.pending";
  /** Gauge of external calls whose outcome is unknown. */
  public static final String UNKNOWN_OUTCOMES = "idem.unknown.outcomes";
  /** Time gauge: how long the oldest unknown outcome has been unknown (0 when none). */
  public static final String OLDEST_UNKNOWN_OUTCOME = "idem.unknown.outcomes.oldest";
  /** The refresh interval of {@link #start(Operations, MeterRegistry)}: 30 seconds. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofSeconds(30);
  /** The longest refresh interval accepted: one day. */
  public static final Duration MAX_INTERVAL = Duration.ofDays(1);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.metrics");

  private final Operations operations;
  private final MeterRegistry registry;
  private final List<Gauge> gauges = new CopyOnWriteArrayList<>();
  private final ScheduledExecutorService scheduler;
  // Written by the refresh thread (or a caller of refresh()), read by scrapes.
  private volatile double pending = Double.NaN;
  private volatile double parked = Double.NaN;
  private volatile double oldestPendingSeconds = Double.NaN;
  private volatile double unknown = Double.NaN;
  private volatile double oldestUnknownSeconds = Double.NaN;

  private IdemGauges(Operations operations, MeterRegistry registry) {
    this.operations = operations;
    this.registry = registry;
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "idem-gauges");
      t.setDaemon(true);
      return t;
    });
  }

  private void begin(Duration interval) {
    gauges.add(Gauge.builder(PENDING, this, g -> g.pending).description("Outbox messages committed and not yet sent").register(registry));
    gauges.add(Gauge.builder(PARKED, this, g -> g.parked).description("Outbox messages parked until a redrive").register(registry));
    gauges.add(TimeGauge.builder(OLDEST_PENDING, this, TimeUnit.SECONDS, g -> g.oldestPendingSeconds)
        .description("Age of the oldest pending outbox message").register(registry));
    gauges.add(Gauge.builder(UNKNOWN_OUTCOMES, this, g -> g.unknown)
        .description("External calls whose lease ran out before a result was recorded").register(registry));
    gauges.add(TimeGauge.builder(OLDEST_UNKNOWN_OUTCOME, this, TimeUnit.SECONDS, g -> g.oldestUnknownSeconds)
        .description("How long the oldest unknown outcome has been unknown").register(registry));
    scheduler.scheduleWithFixedDelay(this::refresh, 0, interval.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** {@link #start(Operations, MeterRegistry, Duration)} every {@link #DEFAULT_INTERVAL} (30 s). */
  public static IdemGauges start(Operations operations, MeterRegistry registry) {
    return start(operations, registry, DEFAULT_INTERVAL);
  }

  /**
   * Registers the gauges on {@code registry} and starts refreshing them every {@code interval}, the
   * first time at once. Close it (or let the application context do so) to stop. One per registry:
   * a second one on the same registry would find the gauges taken and show nothing of its own.
   *
   * @param operations from {@code idem.operations()}
   * @throws IllegalArgumentException if an argument is null, or {@code interval} is not positive or
   *     longer than {@link #MAX_INTERVAL}
   */
  public static IdemGauges start(Operations operations, MeterRegistry registry, Duration interval) {
    if (operations == null || registry == null || interval == null) {
      throw new IllegalArgumentException("operations, registry and interval must not be null");
    }
    if (interval.isNegative() || interval.isZero() || interval.compareTo(MAX_INTERVAL) > 0) {
      throw new IllegalArgumentException("interval must be positive and at most " + MAX_INTERVAL + ", got " + interval);
    }
    IdemGauges gauges = new IdemGauges(operations, registry);
    gauges.begin(interval);
    return gauges;
  }

  /**
   * Queries now, on the calling thread, and updates the gauges; what the schedule calls. Safe to
   * call at any time, concurrently with the schedule.
   *
   * @return true if both queries succeeded; false if one failed, which is logged and leaves every
   *     gauge at its last value
   */
  public boolean refresh() {
    try {
      OutboxStats outbox = operations.outboxStats();
      UnknownOutcomes outcomes = operations.unknownOutcomes();
      pending = outbox.pending();
      parked = outbox.parked();
      oldestPendingSeconds = seconds(outbox.oldestPending());
      unknown = outcomes.count();
      oldestUnknownSeconds = seconds(outcomes.oldest());
      return true;
    } catch (RuntimeException e) {
      LOG.warn("could not read the outbox's backlog and the unknown outcomes; the gauges keep their last values: {}", e.toString());
      return false;
    }
  }

  private static double seconds(Duration d) {
    return d == null ? 0 : d.toNanos() / 1e9;
  }

  /** Stops the refresh thread (without waiting for a query in progress) and removes the gauges from the registry. Idempotent. */
  @Override
  public void close() {
    scheduler.shutdownNow();
    gauges.forEach(registry::remove);
  }
}
