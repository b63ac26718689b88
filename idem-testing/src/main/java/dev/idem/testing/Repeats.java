package dev.idem.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Repeats injected into your own code, with the effect counted: delivers one intent to your
 * endpoint, handler or consumer in each of the ways every hop repeats ({@link Delivery}), and
 * reports, per intent, how many effects your table holds, and which copy made each extra one.
 *
 * <pre>{@code
 * FaultyDataSource db = FaultyDataSource.wrap(pool);           // the service runs on this
 * RepeatReport report = Repeats.of(Effects.in(pool, "payments", "order_id"))
 *     .target(Targets.http(copy -> HttpRequest.newBuilder(uri)
 *         .header("Idempotency-Key", copy.key())
 *         .POST(BodyPublishers.ofString("{\"orderId\":\"" + copy.intent() + "\"}")).build()))
 *     .faults(db)
 *     .deliver(Delivery.CONCURRENT, Delivery.REPLY_LOST, Delivery.KILLED_BEFORE_COMMIT, Delivery.KILLED_AFTER_COMMIT)
 *     .run();
 * report.assertOneEffectPerIntent();
 * }</pre>
 *
 * <p><b>What is asserted</b> is the observable property: exactly one row per intent in the table
 * {@link Effects} names, read from the database after each copy (after the whole burst for {@link
 * Delivery#CONCURRENT}). Every trial uses a fresh intent and fresh keys, so trials and runs never
 * see each other's rows, and a test may run them against a database other tests use.
 *
 * <p><b>Bounded.</b> Each copy is delivered at most {@link #attempts} times (5 by default) while
 * the target says a real sender would deliver it again, and within {@link #timeout} (30 s by
 * default); a copy still running then is abandoned and reported. Nothing is ordered by sleeping:
 * concurrent copies start together at a latch; the only pause is a sender's back-off between
 * attempts (10 ms, doubling, at most 500 ms).
 *
 * <p>Not thread-safe: configure, then {@link #run()} from one thread. A target that is {@link
 * AutoCloseable} is closed at the end of each run.
 */
public final class Repeats {
  private final Effects effects;
  private Target target;
  private final Set<Delivery> deliveries = new LinkedHashSet<>();
  private final Map<Delivery, String> expected = new EnumMap<>(Delivery.class);
  private FaultyDataSource faults;
  private int concurrentCopies = 8;
  private int messages = 3;
  private int attempts = 5;
  private Duration timeout = Duration.ofSeconds(30);
  /** Null: the default, {@code idem} on PostgreSQL, the DataSource's own database on MariaDB. */
  private String idemSchema;

  private Repeats(Effects effects) {
    this.effects = effects;
  }

  /** Repeats whose effects are counted in {@code effects}. */
  public static Repeats of(Effects effects) {
    return new Repeats(Require.present(effects, "effects"));
  }

  /** Where the copies go: {@link Targets#http}, {@link Targets#handler}, {@link KafkaTarget}, or your own. */
  public Repeats target(Target target) {
    this.target = Require.present(target, "target");
    return this;
  }

  /**
   * The deliveries to run, in this order (each once, whatever the order and number of calls).
   *
   * @throws IllegalArgumentException on a null delivery
   */
  public Repeats deliver(Delivery... deliveries) {
    Require.present(deliveries, "deliveries");
    for (int i = 0; i < deliveries.length; i++) {
      this.deliveries.add(Require.present(deliveries[i], "deliveries[" + i + "]"));
    }
    return this;
  }

  /**
   * Asserts one effect per intent for {@code outside}, a delivery outside idem's guarantee ({@link
   * Delivery#PAST_WINDOW} or {@link Delivery#FRESH_KEY}), because your service absorbs it by other
   * means, which {@code because} names, e.g. {@code "payments are unique by order_id"}. Without
   * it, such a delivery is reported, not asserted.
   *
   * @throws IllegalArgumentException if {@code outside} is within the guarantee (always asserted),
   *     or {@code because} is blank
   */
  public Repeats expectOneEffect(Delivery outside, String because) {
    Require.present(outside, "outside");
    if (outside.withinGuarantee()) {
      throw new IllegalArgumentException(outside + " is within idem's guarantee and always asserted;"
          + " expectOneEffect is for PAST_WINDOW and FRESH_KEY");
    }
    if (because == null || because.isBlank()) {
      throw new IllegalArgumentException("because is blank: say what makes your service leave one effect under " + outside);
    }
    expected.put(outside, because.strip());
    return this;
  }

  /**
   * The service's data source, wrapped, for {@link Delivery#KILLED_BEFORE_COMMIT} and {@link
   * Delivery#KILLED_AFTER_COMMIT}: the service must take its connections from it.
   */
  public Repeats faults(FaultyDataSource service) {
    this.faults = Require.present(service, "service");
    return this;
  }

  /**
   * How many copies {@link Delivery#CONCURRENT} sends at once, each on a thread of its own;
   * default 8.
   *
   * @throws IllegalArgumentException outside 2 to 256
   */
  public Repeats concurrentCopies(int n) {
    this.concurrentCopies = Require.within(n, 2, 256, "concurrentCopies");
    return this;
  }

  /**
   * How many messages (sequence numbers 1..n) {@link Delivery#OUT_OF_ORDER} delivers; default 3.
   *
   * @throws IllegalArgumentException outside 2 to 100
   */
  public Repeats messages(int n) {
    this.messages = Require.within(n, 2, 100, "messages");
    return this;
  }

  /**
   * The most attempts at one copy (the first and the sender's retries); default 5.
   *
   * @throws IllegalArgumentException outside 1 to 100
   */
  public Repeats attempts(int n) {
    this.attempts = Require.within(n, 1, 100, "attempts");
    return this;
  }

  /**
   * The longest one copy may take, all its attempts together; default 30 s.
   *
   * @throws IllegalArgumentException if null, not positive, or over 10 minutes
   */
  public Repeats timeout(Duration perCopy) {
    Require.present(perCopy, "perCopy");
    if (perCopy.isNegative() || perCopy.isZero() || perCopy.compareTo(Duration.ofMinutes(10)) > 0) {
      throw new IllegalArgumentException("timeout must be positive and at most 10 minutes, was " + perCopy);
    }
    this.timeout = perCopy;
    return this;
  }

  /**
   * The schema of idem's tables, where {@link Delivery#PAST_WINDOW} ages the key's rows; default
   * {@code idem} on PostgreSQL and, on MariaDB (where a schema is a database), the database the
   * effects' DataSource is in.
   */
  public Repeats idemSchema(String schema) {
    this.idemSchema = Require.identifier(schema, "schema");
    if (schema.contains(".")) {
      throw new IllegalArgumentException("schema '" + schema + "' must be a schema name alone");
    }
    return this;
  }

  /**
   * Runs every delivery asked for, each with a fresh intent, and reports.
   *
   * @throws IllegalArgumentException naming what is missing: no target, no delivery, a killing
   *     delivery without {@link #faults}, {@link Delivery#OUT_OF_ORDER} without {@link
   *     Effects#sequencedBy}, {@link #expectOneEffect} for a delivery not asked for, {@link
   *     Delivery#PAST_WINDOW} without idem's tables in {@link #idemSchema}
   * @throws IllegalStateException if the database cannot be read
   */
  public RepeatReport run() {
    if (target == null) {
      throw new IllegalArgumentException("no target: call target(Targets.http(...)), target(Targets.handler(...))"
          + " or target(KafkaTarget.of(...)) before run()");
    }
    if (deliveries.isEmpty()) {
      throw new IllegalArgumentException("no delivery: call deliver(Delivery.CONCURRENT, ...) before run()");
    }
    List<Delivery> killing = deliveries.stream().filter(Delivery::kills).toList();
    if (!killing.isEmpty() && faults == null) {
      throw new IllegalArgumentException(killing + " kill the service's transaction at its commit, so the service"
          + " must run on a FaultyDataSource: FaultyDataSource.wrap(pool), given to the service and to faults(...)");
    }
    if (deliveries.contains(Delivery.OUT_OF_ORDER) && !effects.sequenced()) {
      throw new IllegalArgumentException("OUT_OF_ORDER reads each effect's sequence number: name its column with "
          + "Effects.in(...).sequencedBy(\"seq\")");
    }
    for (Delivery d : expected.keySet()) {
      if (!deliveries.contains(d)) {
        throw new IllegalArgumentException("expectOneEffect(" + d + ", ...) but " + d + " is not delivered: add it to deliver(...)");
      }
    }
    IdemRows idemRows = new IdemRows(effects.dataSource(), idemSchema);
    if (deliveries.contains(Delivery.PAST_WINDOW)) {
      idemRows.check();
    }
    Runner runner = new Runner(effects, target, faults, expected, idemRows, concurrentCopies, messages, attempts, timeout);
    try {
      List<RepeatReport.Trial> trials = new ArrayList<>();
      for (Delivery d : deliveries) {
        trials.addAll(runner.trials(d));
      }
      return new RepeatReport(effects.toString(), trials);
    } finally {
      runner.close();
    }
  }
}
