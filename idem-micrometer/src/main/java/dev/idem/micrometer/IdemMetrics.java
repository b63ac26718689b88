package dev.idem.micrometer;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;

/**
 * idem's {@link IdemEvent}s as Micrometer meters: register it as the {@link IdemListener} of an
 * {@code Idem} ({@code Idem.builder(ds).listener(IdemMetrics.of(registry))}; the Spring Boot starter
 * does this when a {@code MeterRegistry} bean exists).
 *
 * <p>Every meter is tagged with {@code source}, the event's tool and hop ({@code "executor:payments"},
 * {@code "inbox:billing"}, {@code "transitions:shop.orders"}, {@code "outbox"} for the relay), and at most one
 * low-cardinality outcome tag. Keys, message ids and row ids are never tags: the number of series
 * is bounded by the executors, consumers, tables and streams the application configures.
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>tags</th><th>from</th></tr>
 *   <tr><td>{@value #REPEATS}</td><td>counter</td><td>source, kind</td><td>every repeat caught:
 *     kind {@code replayed} (executor and inbox), {@code in_flight}, {@code already_done} and {@code
 *     conflict} (transitions), {@code stale_fence}, {@code lease_taken_over}, {@code
 *     sequence_ignored}</td></tr>
 *   <tr><td>{@value #APPLIED}</td><td>counter</td><td>source</td><td>{@code Applied}, and {@code
 *     Transition} with {@code APPLIED}</td></tr>
 *   <tr><td>{@value #REPEAT_AGE}</td><td>timer with histogram buckets at the usual windows (1 s to
 *     30 d)</td><td>source</td><td>{@code Replayed.age}</td></tr>
 *   <tr><td>{@value #REPEAT_WINDOW_USED}</td><td>distribution summary, base unit
 *     {@code percent} (Prometheus: {@code idem_repeat_window_used_percent}), with buckets 25, 50, 80, 90, 100 (a repeat past 100 is in the count only)</td><td>source</td><td>{@code
 *     Replayed.windowUsed} &times; 100: 40 is a repeat caught 40% into its window</td></tr>
 *   <tr><td>{@value #FINGERPRINT_MISMATCHES}</td><td>counter</td><td>source</td><td>{@code
 *     FingerprintMismatch} (HTTP 422)</td></tr>
 *   <tr><td>{@value #EXPIRED}</td><td>counter</td><td>source</td><td>{@code Expired.count}: rows
 *     deleted</td></tr>
 *   <tr><td>{@value #OUTBOX_PUBLISHED}</td><td>counter</td><td>source</td><td>{@code Published}</td></tr>
 *   <tr><td>{@value #OUTBOX_PUBLISH}</td><td>timer</td><td>source</td><td>{@code
 *     Published.publishTime}</td></tr>
 *   <tr><td>{@value #OUTBOX_FAILED}</td><td>counter</td><td>source, parked</td><td>{@code
 *     PublishFailed}</td></tr>
 *   <tr><td>{@value #OPERATOR_ACTIONS}</td><td>counter</td><td>source, action</td><td>{@code
 *     OperatorAction}</td></tr>
 * </table>
 *
 * <p>Guarantees: one increment per event delivered, so the counts are exactly what idem reported;
 * safe to share between threads and between several {@code Idem}s on one registry; a meter exists
 * from the first event that needs it (a series that never happened is absent, not zero).
 *
 * <p>Does not guarantee: more than events do (see {@link IdemListener}). An {@code Applied} counted
 * for a call that joined the caller's transaction counts even if that transaction rolls back, and
 * nothing is counted for a crash. Meters are for trends and alerts; count effects in the database
 * when you need certainty.
 */
public final class IdemMetrics implements IdemListener {

  /** Counter of repeats caught, tags {@code source} and {@code kind}. */
  public static final String REPEATS = "idem.repeats";
  /** Counter of effects applied, tag {@code source}. */
  public static final String APPLIED = "idem.applied";
  /** Timer: how old a repeat was when caught, tag {@code source}. */
  public static final String REPEAT_AGE = "idem.repeat.age";
  /**
   * Distribution summary: a repeat's age as a percentage of its dedupe window (0 to 100, more for a
   * repeat of a row not yet expired past it), base unit {@code percent}, tag {@code source}.
   */
  public static final String REPEAT_WINDOW_USED = "idem.repeat.window.used";
  /** Counter of keys refused because they came back with another request, tag {@code source}. */
  public static final String FINGERPRINT_MISMATCHES = "idem.fingerprint.mismatches";
  /** Counter of records deleted past their window, tag {@code source}. */
  public static final String EXPIRED = "idem.expired";
  /** Counter of outbox messages published, tag {@code source}. */
  public static final String OUTBOX_PUBLISHED = "idem.outbox.published";
  /** Timer of the publisher's time per outbox message, tag {@code source}. */
  public static final String OUTBOX_PUBLISH = "idem.outbox.publish";
  /** Counter of failed publishes, tags {@code source} and {@code parked}. */
  public static final String OUTBOX_FAILED = "idem.outbox.failed";
  /** Counter of operator actions, tags {@code source} and {@code action}. */
  public static final String OPERATOR_ACTIONS = "idem.operator.actions";

  /** Bucket bounds of {@value #REPEAT_AGE}: the dedupe windows the seed names, from a client retry to a redrive. */
  private static final Duration[] AGE_BUCKETS = {
      Duration.ofSeconds(1), Duration.ofSeconds(10), Duration.ofMinutes(1), Duration.ofMinutes(10),
      Duration.ofHours(1), Duration.ofHours(6), Duration.ofDays(1), Duration.ofDays(3),
      Duration.ofDays(7), Duration.ofDays(14), Duration.ofDays(30)};

  /** The base unit of {@value #REPEAT_WINDOW_USED}; Prometheus appends it to the name. */
  private static final String PERCENT = "percent";

  /**
   * Bucket bounds of {@value #REPEAT_WINDOW_USED}, in percent; {@link DedupeWindow#NEAR_END} (80) is
   * the one to alert on. Whole numbers because a fixed-boundary histogram counts a value in the
   * bucket of its ceiling: a fraction such as 0.3 would land in the bucket of 1.
   */
  private static final double[] WINDOW_BUCKETS = {25, 50, Math.round(DedupeWindow.NEAR_END * 100), 90, 100};

  private static final String SOURCE = "source";
  private static final String KIND = "kind";
  private static final String UNKNOWN = "unknown";

  private final Meter.MeterProvider<Counter> repeats;
  private final Meter.MeterProvider<Counter> applied;
  private final Meter.MeterProvider<Timer> repeatAge;
  private final Meter.MeterProvider<DistributionSummary> windowUsed;
  private final Meter.MeterProvider<Counter> mismatches;
  private final Meter.MeterProvider<Counter> expired;
  private final Meter.MeterProvider<Counter> published;
  private final Meter.MeterProvider<Timer> publishTime;
  private final Meter.MeterProvider<Counter> failed;
  private final Meter.MeterProvider<Counter> operatorActions;

  private IdemMetrics(MeterRegistry registry) {
    repeats = counter(registry, REPEATS, "Repeats caught, per hop and kind: a jump means something upstream retries");
    applied = counter(registry, APPLIED, "Effects applied and recorded with their key");
    repeatAge = Timer.builder(REPEAT_AGE).description("How old a repeat was when caught")
        .serviceLevelObjectives(AGE_BUCKETS).withRegistry(registry);
    windowUsed = DistributionSummary.builder(REPEAT_WINDOW_USED)
        .description("A repeat's age as a percentage of its dedupe window: repeats near 100 predict repeats past it")
        .baseUnit(PERCENT).serviceLevelObjectives(WINDOW_BUCKETS).withRegistry(registry);
    mismatches = counter(registry, FINGERPRINT_MISMATCHES, "Keys that came back with another request and were refused");
    expired = counter(registry, EXPIRED, "Records deleted past their dedupe window");
    published = counter(registry, OUTBOX_PUBLISHED, "Outbox messages published by the relay");
    publishTime = Timer.builder(OUTBOX_PUBLISH).description("The publisher's time per outbox message").withRegistry(registry);
    failed = counter(registry, OUTBOX_FAILED, "Failed publishes of outbox messages (parked: the last attempt)");
    operatorActions = counter(registry, OPERATOR_ACTIONS, "Rows changed by hand through Operations");
  }

  /**
   * Meters on {@code registry}. Build one per registry and share it: a second one on the same
   * registry shares its meters, so each event would be counted twice.
   *
   * @throws IllegalArgumentException if {@code registry} is null
   */
  public static IdemMetrics of(MeterRegistry registry) {
    if (registry == null) {
      throw new IllegalArgumentException("registry must not be null");
    }
    return new IdemMetrics(registry);
  }

  private static Meter.MeterProvider<Counter> counter(MeterRegistry registry, String name, String description) {
    return Counter.builder(name).description(description).withRegistry(registry);
  }

  /** The event's source, never null (Micrometer refuses a null tag value). */
  private static String source(IdemEvent e) {
    String s = e.source();
    return s == null ? UNKNOWN : s;
  }

  private void repeat(IdemEvent e, String kind) {
    repeats.withTags(SOURCE, source(e), KIND, kind).increment();
  }

  @Override
  public void onApplied(IdemEvent.Applied e) {
    applied.withTags(SOURCE, source(e)).increment();
  }

  @Override
  public void onReplayed(IdemEvent.Replayed e) {
    String source = source(e);
    repeats.withTags(SOURCE, source, KIND, "replayed").increment();
    if (e.age() != null) {
      repeatAge.withTags(SOURCE, source).record(e.age());
    }
    windowUsed.withTags(SOURCE, source).record(e.windowUsed() * 100);
  }

  @Override
  public void onInFlight(IdemEvent.InFlight e) {
    repeat(e, "in_flight");
  }

  @Override
  public void onFingerprintMismatch(IdemEvent.FingerprintMismatch e) {
    mismatches.withTags(SOURCE, source(e)).increment();
  }

  @Override
  public void onLeaseTakenOver(IdemEvent.LeaseTakenOver e) {
    repeat(e, "lease_taken_over");
  }

  @Override
  public void onExpired(IdemEvent.Expired e) {
    expired.withTags(SOURCE, source(e)).increment(e.count());
  }

  @Override
  public void onTransition(IdemEvent.Transition e) {
    if (e.outcome() == Outcome.APPLIED) {
      applied.withTags(SOURCE, source(e)).increment();
    } else if (e.outcome() == Outcome.ALREADY_DONE) {
      repeat(e, "already_done");
    } else if (e.outcome() == Outcome.CONFLICT) {
      repeat(e, "conflict");
    }
  }

  @Override
  public void onStaleFence(IdemEvent.StaleFence e) {
    repeat(e, "stale_fence");
  }

  @Override
  public void onSequenceIgnored(IdemEvent.SequenceIgnored e) {
    repeat(e, "sequence_ignored");
  }

  @Override
  public void onPublished(IdemEvent.Published e) {
    String source = source(e);
    published.withTags(SOURCE, source).increment();
    if (e.publishTime() != null) {
      publishTime.withTags(SOURCE, source).record(e.publishTime());
    }
  }

  @Override
  public void onPublishFailed(IdemEvent.PublishFailed e) {
    failed.withTags(SOURCE, source(e), "parked", Boolean.toString(e.parked())).increment();
  }

  @Override
  public void onOperatorAction(IdemEvent.OperatorAction e) {
    operatorActions.withTags(SOURCE, source(e), "action", e.action() == null ? UNKNOWN : e.action()).increment();
  }
}
