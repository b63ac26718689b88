package dev.idem.spring.boot;

import dev.idem.jdbc.lease.Lease;
import dev.idem.jdbc.lease.Leases;
import dev.idem.key.IdempotencyKey;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * idem's scheduled checks ({@code idem.checks.*}): every {@code interval}, on one daemon thread of
 * its own, tries to take the lease {@code lease-resource} for one interval and, if it got it, runs
 * each {@link ScheduledCheck} in turn; the counts they answer are kept for the meters ({@code
 * IdemChecksMeters}) and {@code /actuator/idem}. The first try is at start-up.
 *
 * <p>One run per interval across the fleet, by the database clock: the lease is held for the whole
 * interval and never released, so the next grant (to any instance, a restarted one included) is
 * at least one interval after the last. An instance that finds it held skips that tick; since only
 * a later run can hold it, its own findings are then out of date, and its gauges read NaN until it
 * runs again (alert on the fleet's maximum). Before each check after the first the lease is renewed
 * for another interval; if it ended (a run longer than the interval that another instance took
 * over) the rest of the run is dropped. A failure (the database down) is logged at WARN on this
 * class's logger and counted; the next tick tries again.
 *
 * <p>Not guaranteed: that a tick comes exactly every interval (the delay is counted from the end of
 * the previous run on this instance), or that the findings of a run are still true when read.
 */
final class IdemChecks extends DaemonSchedule {
  private static final Logger LOG = LoggerFactory.getLogger(IdemChecks.class);

  /** The lease's resource unless {@code idem.checks.lease-resource} names another. */
  static final String DEFAULT_RESOURCE = "idem-checks";

  /** Outcomes of a tick, the {@code outcome} tag of {@code idem.checks.runs}. */
  enum Outcome {
    /** This instance held the lease and ran the checks (some may have failed, counted apart). */
    RAN,
    /** Another instance held the lease: nothing ran here. */
    SKIPPED,
    /** The lease could not be asked for or was lost mid-run: the checks did not all run. */
    FAILED;

    String tag() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** One check's part of a run: its counts, or the error it failed with (counts empty). */
  record CheckRun(Map<String, Long> counts, Map<String, Object> examples, String error) {}

  /**
   * The last run this instance made.
   *
   * @param at the database clock when it started
   * @param token the lease's fencing token of that run
   * @param checks per check name, what it found
   */
  record Run(OffsetDateTime at, long token, Map<String, CheckRun> checks) {}

  private final Supplier<List<ScheduledCheck>> checks;
  private final Leases leases;
  private final DataSource dataSource;
  private final String resource;
  private final String holder;
  private final Duration interval;
  private final Map<Outcome, AtomicLong> ticks = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> failures = new ConcurrentHashMap<>();
  private final List<Consumer<Run>> listeners = new CopyOnWriteArrayList<>();
  private volatile Run last;
  /** False once a later run elsewhere is known (this instance skipped a tick): the findings are out of date. */
  private volatile boolean current;
  private volatile Boolean mariadb;

  /**
   * @param checks the checks, asked for at each run
   * @param leases the lease store (the application's {@code Idem}'s)
   * @param dataSource where the database clock is read
   * @throws IllegalArgumentException if {@code interval} is outside 1 s to 1 day or {@code resource}
   *     is not visible ASCII of 1 to 255 characters, naming the property
   */
  IdemChecks(Supplier<List<ScheduledCheck>> checks, Leases leases, DataSource dataSource, String resource, Duration interval) {
    // The first tick at start-up: the lease, held one interval from the last grant, keeps a
    // restarting fleet from running more than once per interval.
    super("idem-checks", Duration.ZERO, checked(interval));
    IdempotencyKey.check("idem.checks.lease-resource", resource); // as Leases checks it, but at start-up
    this.checks = checks;
    this.leases = leases;
    this.dataSource = dataSource;
    this.resource = resource;
    this.interval = interval;
    this.holder = holder();
    for (Outcome o : Outcome.values()) {
      ticks.put(o, new AtomicLong());
    }
  }

  private static Duration checked(Duration interval) {
    if (interval == null || interval.compareTo(Duration.ofSeconds(1)) < 0 || interval.compareTo(Leases.MAX_TTL) > 0) {
      throw new IllegalArgumentException("idem.checks.interval must be within 1s and 1d (the lease is held for one"
          + " interval), was " + interval);
    }
    return interval;
  }

  /** A holder name unique to this instance: {@code pid@host} and a random part (two contexts may share a JVM). */
  private static String holder() {
    String jvm = ManagementFactory.getRuntimeMXBean().getName();
    StringBuilder b = new StringBuilder();
    jvm.codePoints().limit(200).forEach(c -> b.append(c > 0x20 && c < 0x7f ? (char) c : '_'));
    return b + "/" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** Refuses a check name that is not a short tag value (it becomes one). */
  static void checkName(String name) {
    if (name == null || !name.matches("[A-Za-z0-9_.:\\-]{1,100}")) {
      throw new IllegalArgumentException("a check's name is a meter tag: letters, digits, '_', '.', ':' or '-', 1 to 100,"
          + " was " + name);
    }
  }

  /** One tick: takes the lease if free and runs every check; answers what happened. */
  Outcome runOnce() {
    Outcome o;
    try {
      o = tick();
    } catch (RuntimeException e) {
      LOG.warn("idem's scheduled checks failed; trying again in {}", interval, e);
      o = Outcome.FAILED;
    }
    ticks.get(o).incrementAndGet();
    return o;
  }

  private Outcome tick() {
    List<ScheduledCheck> all = checks.get();
    Optional<Lease> got = leases.acquire(resource, holder, interval);
    if (got.isEmpty()) {
      current = false; // only a grant after this instance's last one can hold it now
      LOG.debug("idem's scheduled checks: lease {} held by another instance, skipping", resource);
      return Outcome.SKIPPED;
    }
    Lease lease = got.get();
    OffsetDateTime at = databaseNow();
    Map<String, CheckRun> found = new LinkedHashMap<>();
    Outcome outcome = Outcome.RAN;
    for (int i = 0; i < all.size(); i++) {
      ScheduledCheck check = all.get(i);
      if (i > 0 && !lease.renew(interval)) {
        LOG.warn("idem's scheduled checks outlasted their lease {} ({}): another instance may run them now; {} and the"
            + " checks after it dropped from this run", resource, interval, check.name());
        outcome = Outcome.FAILED;
        break;
      }
      try {
        CheckResult r = check.run(lease);
        found.put(check.name(), new CheckRun(r.counts(), r.examples(), null));
      } catch (RuntimeException e) {
        LOG.warn("idem's scheduled check {} failed", check.name(), e);
        failures.computeIfAbsent(check.name(), n -> new AtomicLong()).incrementAndGet();
        found.put(check.name(), new CheckRun(Map.of(), Map.of(), String.valueOf(e.getMessage())));
      }
    }
    Run run = new Run(at, lease.token().value(), Map.copyOf(found));
    last = run;
    current = true;
    listeners.forEach(l -> l.accept(run));
    return outcome;
  }

  /** The database clock: PostgreSQL's {@code now()}, MariaDB's {@code UTC_TIMESTAMP(6)}. */
  private OffsetDateTime databaseNow() {
    try (Connection c = dataSource.getConnection()) {
      Boolean maria = mariadb;
      if (maria == null) {
        mariadb = maria = StartupDatabase.of(c).vendor() == StartupDatabase.Vendor.MARIADB;
      }
      try (Statement st = c.createStatement();
          ResultSet rs = st.executeQuery(maria ? "SELECT UTC_TIMESTAMP(6)" : "SELECT now()")) {
        rs.next();
        OffsetDateTime at = maria ? rs.getObject(1, LocalDateTime.class).atOffset(ZoneOffset.UTC)
            : rs.getObject(1, OffsetDateTime.class);
        if (!c.getAutoCommit()) {
          c.rollback();
        }
        return at;
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not read the database clock: " + e.getMessage(), e);
    }
  }

  /** Called after each run of this instance, on the schedule's thread. */
  void onRun(Consumer<Run> listener) {
    listeners.add(listener);
  }

  /** The last run of this instance, or null before its first. */
  Run last() {
    return last;
  }

  /**
   * What the gauge of {@code check} and {@code kind} reads: the last run's count; NaN before it,
   * when the check failed in it, or once another instance has run since.
   */
  double count(String check, String kind) {
    Run run = last;
    if (run == null || !current) {
      return Double.NaN;
    }
    CheckRun c = run.checks().get(check);
    Long n = c == null ? null : c.counts().get(kind);
    return n == null ? Double.NaN : n;
  }

  /** Ticks of this instance with {@code outcome}. */
  long ticks(Outcome outcome) {
    return ticks.get(outcome).get();
  }

  /** Failed runs of {@code check} on this instance. */
  long failures(String check) {
    AtomicLong n = failures.get(check);
    return n == null ? 0 : n.get();
  }

  /** The last run's database time in seconds since the epoch, NaN before the first. */
  double lastRunEpochSeconds() {
    Run run = last;
    return run == null ? Double.NaN : run.at().toEpochSecond() + run.at().getNano() / 1e9;
  }

  String holderName() {
    return holder;
  }

  /** What {@code /actuator/idem} shows under {@code checks}. */
  Map<String, Object> view() {
    Map<String, Object> v = new LinkedHashMap<>();
    v.put("interval", interval.toString());
    v.put("leaseResource", resource);
    v.put("holder", holder);
    Map<String, Long> t = new LinkedHashMap<>();
    for (Outcome o : Outcome.values()) {
      t.put(o.tag(), ticks(o));
    }
    v.put("ticks", t);
    Run run = last;
    if (run == null) {
      v.put("lastRun", null);
    } else {
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("at", run.at().toString());
      r.put("leaseToken", run.token());
      // false: another instance ran since; its findings are newer than these
      r.put("current", current);
      Map<String, Object> byCheck = new LinkedHashMap<>();
      List<String> names = new ArrayList<>(run.checks().keySet());
      names.sort(null);
      for (String name : names) {
        CheckRun c = run.checks().get(name);
        Map<String, Object> one = new LinkedHashMap<>();
        if (c.error() != null) {
          one.put("error", c.error());
        } else {
          one.put("counts", c.counts());
          one.put("examples", c.examples());
        }
        byCheck.put(name, one);
      }
      r.put("checks", byCheck);
      v.put("lastRun", r);
    }
    return v;
  }

  @Override
  void scheduledRun() {
    runOnce(); // catches its own failures
  }
}
