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
 * {@value #OLDEST_PENDING}; in the Debezium layout {@value #SLOT_LAG}, see {@link #startForDebezium}) and the external calls whose outcome is unknown ({@value
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
  /**
   * Gauge of parked outbox messages whose effect already committed (an inbox holds their id): a
   * redrive would only be recognised as a repeat, and dropping them loses nothing. Counted within
   * {@value #PARKED} too.
   */
  public static final String PARKED_EFFECT_COMMITTED = "idem.outbox.parked.effect.committed";
  /** Time gauge: age of the oldest pending outbox message (0 when none). */
  public static final String OLDEST_PENDING = "idem.outbox.oldest.pending";
  /** Gauge of external calls whose outcome is unknown. */
  public static final String UNKNOWN_OUTCOMES = "idem.unknown.outcomes";
  /**
   * Gauge, in bytes, of the {@code DEBEZIUM} outbox layout's backlog: the write-ahead log its
   * connector's replication slot has not confirmed ({@link Operations#replicationSlotLag}); shown by
   * {@link #startForDebezium} in place of the polled layout's {@value #PENDING}, {@value #PARKED} and
   * {@value #OLDEST_PENDING}, which read 0 there (no relay of idem's holds those messages).
   */
  public static final String SLOT_LAG = "idem.outbox.slot.lag";
  /** Time gauge: how long the oldest unknown outcome has been unknown (0 when none). */
  public static final String OLDEST_UNKNOWN_OUTCOME = "idem.unknown.outcomes.oldest";
  /** The refresh interval of {@link #start(Operations, MeterRegistry)}: 30 seconds. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofSeconds(30);
  /** The longest refresh interval accepted: one day. */
  public static final Duration MAX_INTERVAL = Duration.ofDays(1);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.metrics");

  private final Operations operations;
  private final MeterRegistry registry;
  /** The Debezium connector's replication slot, or null for the polled layout. */
  private final String slot;
  private final List<Gauge> gauges = new CopyOnWriteArrayList<>();
  private final ScheduledExecutorService scheduler;
  // Written by the refresh thread (or a caller of refresh()), read by scrapes.
  private volatile double pending = Double.NaN;
  private volatile double parked = Double.NaN;
  private volatile double parkedEffectCommitted = Double.NaN;
  private volatile double oldestPendingSeconds = Double.NaN;
  private volatile double slotLagBytes = Double.NaN;
  private volatile double unknown = Double.NaN;
  private volatile double oldestUnknownSeconds = Double.NaN;

  private IdemGauges(Operations operations, MeterRegistry registry, String slot) {
    this.operations = operations;
    this.registry = registry;
    this.slot = slot;
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "idem-gauges");
      t.setDaemon(true);
      return t;
    });
  }

  private void begin(Duration interval) {
    if (slot == null) {
      gauges.add(Gauge.builder(PENDING, this, g -> g.pending).description("Outbox messages committed and not yet sent").register(registry));
      gauges.add(Gauge.builder(PARKED, this, g -> g.parked).description("Outbox messages parked until a redrive").register(registry));
      gauges.add(Gauge.builder(PARKED_EFFECT_COMMITTED, this, g -> g.parkedEffectCommitted)
          .description("Parked outbox messages whose effect an inbox already committed").register(registry));
      gauges.add(TimeGauge.builder(OLDEST_PENDING, this, TimeUnit.SECONDS, g -> g.oldestPendingSeconds)
          .description("Age of the oldest pending outbox message").register(registry));
    } else {
      // the slot's name is no tag: one connector per Idem, and a tag would be one series per slot ever used
      gauges.add(Gauge.builder(SLOT_LAG, this, g -> g.slotLagBytes).baseUnit("bytes")
          .description("Write-ahead log the Debezium connector's replication slot has not confirmed").register(registry));
    }
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
    check(operations, registry, interval);
    IdemGauges gauges = new IdemGauges(operations, registry, null);
    gauges.begin(interval);
    return gauges;
  }

  /**
   * The gauges of an {@code Idem} built with the {@code DEBEZIUM} outbox layout (PostgreSQL only):
   * the backlog is the connector's, so {@value #SLOT_LAG} (its replication slot's lag, in bytes)
   * replaces the polled layout's pending, parked and oldest-pending gauges; the unknown outcomes
   * are the same. Otherwise as {@link #start(Operations, MeterRegistry, Duration)}: a refresh that
   * fails (the slot missing: the connector never ran, or it was dropped) is logged and keeps NaN or
   * the last value, never a made-up 0.
   *
   * @param slot the connector's replication slot ({@code DebeziumOutbox.Builder.slot}, default {@code idem_outbox})
   * @throws IllegalArgumentException as {@link #start(Operations, MeterRegistry, Duration)}, or if
   *     {@code slot} is not a slot name (1 to 63 lower-case letters, digits, underscores)
   */
  public static IdemGauges startForDebezium(Operations operations, MeterRegistry registry, Duration interval, String slot) {
    check(operations, registry, interval);
    if (slot == null || !slot.matches("[a-z0-9_]{1,63}")) {
      throw new IllegalArgumentException("slot must be 1 to 63 lower-case letters, digits or underscores, was "
          + (slot == null ? "null" : "'" + slot + "'"));
    }
    IdemGauges gauges = new IdemGauges(operations, registry, slot);
    gauges.begin(interval);
    return gauges;
  }

  private static void check(Operations operations, MeterRegistry registry, Duration interval) {
    if (operations == null || registry == null || interval == null) {
      throw new IllegalArgumentException("operations, registry and interval must not be null");
    }
    if (interval.isNegative() || interval.isZero() || interval.compareTo(MAX_INTERVAL) > 0) {
      throw new IllegalArgumentException("interval must be positive and at most " + MAX_INTERVAL + ", got " + interval);
    }
  }

  /**
   * Queries now, on the calling thread, and updates the gauges; what the schedule calls. Safe to
   * call at any time, concurrently with the schedule.
   *
   * @return true if both queries succeeded; false if one failed, which is logged and leaves that
   *     query's gauges at their last values (the other's are updated)
   */
  public boolean refresh() {
    // Two reads, each on its own: a backlog that cannot be read (a replication slot the connector
    // has not created yet) must not freeze the unknown outcomes' gauges, nor the other way round.
    boolean backlog = read("the outbox's backlog", () -> {
      if (slot == null) {
        OutboxStats outbox = operations.outboxStats();
        pending = outbox.pending();
        parked = outbox.parked();
        parkedEffectCommitted = outbox.parkedEffectCommitted();
        oldestPendingSeconds = seconds(outbox.oldestPending());
      } else {
        slotLagBytes = operations.replicationSlotLag(slot);
      }
    });
    boolean outcomes = read("the unknown outcomes", () -> {
      UnknownOutcomes unknownOutcomes = operations.unknownOutcomes();
      unknown = unknownOutcomes.count();
      oldestUnknownSeconds = seconds(unknownOutcomes.oldest());
    });
    return backlog && outcomes;
  }

  private static boolean read(String what, Runnable query) {
    try {
      query.run();
      return true;
    } catch (RuntimeException e) {
      LOG.warn("could not read {}; its gauges keep their last values: {}", what, e.toString());
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
