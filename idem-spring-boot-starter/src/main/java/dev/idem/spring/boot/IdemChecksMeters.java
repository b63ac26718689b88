package dev.idem.spring.boot;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.TimeGauge;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The meters of {@link IdemChecks} (docs/operations.md): {@value #FINDINGS} per check and kind,
 * {@value #RUNS} per outcome, {@value #FAILURES} per check and {@value #LAST_RUN}. Tags are the
 * checks' names and kinds (a few fixed values), never keys. A check's gauges are registered at its
 * first run; each reads the instance's last run (NaN once another instance ran since). Closed with
 * the context: the meters are removed.
 */
final class IdemChecksMeters implements AutoCloseable {
  /** Gauge: what the last run of a check found, per kind. */
  static final String FINDINGS = "idem.checks.findings";
  /** Counter: ticks of the schedule on this instance, per outcome (ran, skipped, failed). */
  static final String RUNS = "idem.checks.runs";
  /** Counter: runs of a check that threw. */
  static final String FAILURES = "idem.checks.failures";
  /** Time gauge: the database time of this instance's last run, in seconds since the epoch. */
  static final String LAST_RUN = "idem.checks.last.run";

  private final IdemChecks checks;
  private final MeterRegistry registry;
  private final List<Meter> meters = new CopyOnWriteArrayList<>();
  private final Set<String> registered = ConcurrentHashMap.newKeySet();

  IdemChecksMeters(IdemChecks checks, MeterRegistry registry) {
    this.checks = checks;
    this.registry = registry;
    for (IdemChecks.Outcome o : IdemChecks.Outcome.values()) {
      meters.add(FunctionCounter.builder(RUNS, checks, c -> c.ticks(o)).tag("outcome", o.tag())
          .description("Ticks of idem's scheduled checks on this instance: ran, skipped (another instance held the"
              + " lease) or failed").register(registry));
    }
    meters.add(TimeGauge.builder(LAST_RUN, checks, TimeUnit.SECONDS, IdemChecks::lastRunEpochSeconds)
        .description("Database time of this instance's last run of idem's scheduled checks, since the epoch")
        .register(registry));
    checks.onRun(this::register);
    IdemChecks.Run last = checks.last();
    if (last != null) {
      register(last);
    }
  }

  private void register(IdemChecks.Run run) {
    run.checks().forEach((name, c) -> {
      if (registered.add("failures " + name)) {
        meters.add(FunctionCounter.builder(FAILURES, checks, x -> x.failures(name)).tag("check", name)
            .description("Runs of an idem scheduled check that failed").register(registry));
      }
      for (Map.Entry<String, Long> kind : c.counts().entrySet()) {
        if (registered.add("findings " + name + " " + kind.getKey())) {
          meters.add(Gauge.builder(FINDINGS, checks, x -> x.count(name, kind.getKey())).tags("check", name, "kind", kind.getKey())
              .description("What the last run of an idem scheduled check found; NaN once another instance ran since")
              .register(registry));
        }
      }
    });
  }

  @Override
  public void close() {
    meters.forEach(registry::remove);
    meters.clear();
  }
}
