package dev.idem.spring.boot;

import dev.idem.jdbc.lease.Lease;
import dev.idem.jdbc.reconcile.EffectTable;
import dev.idem.jdbc.reconcile.Findings;
import dev.idem.jdbc.reconcile.Reconciliation;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * One check that {@link IdemChecks} runs under its lease: a name (the meters' {@code check} tag, so
 * a few fixed values, never a key) and a run that answers what it found as counts per kind (the
 * {@code kind} tag, likewise fixed) with examples for {@code /actuator/idem}. A check that throws
 * is counted as failed and its counts are unknown until it next succeeds; the other checks of the
 * run still run.
 *
 * <p>Adding a check is one line where the schedule is made ({@code IdemAutoConfiguration}): {@code
 * checks.add(ScheduledCheck.of("name", lease -> ...))}. The lease is the schedule's (one instance
 * of the fleet holds it while the run lasts): a check that writes may fence its writes with it.
 */
interface ScheduledCheck {

  /** The meters' {@code check} tag and the endpoint's name for this check. */
  String name();

  /** Runs the check once; {@code lease} is the schedule's, held while the run lasts. */
  CheckResult run(Lease lease);

  /** A check of that name running {@code run}. */
  static ScheduledCheck of(String name, Function<Lease, CheckResult> run) {
    IdemChecks.checkName(name);
    return new ScheduledCheck() {
      @Override
      public String name() {
        return name;
      }

      @Override
      public CheckResult run(Lease lease) {
        return run.apply(lease);
      }
    };
  }

  /** Kinds of {@link #reconcile}. */
  String DUPLICATE_EFFECT = "duplicate_effect";
  String EFFECT_WITHOUT_KEY = "effect_without_key";
  String KEY_WITHOUT_EFFECT = "key_without_effect";

  /**
   * The most duplicates and keys without effect a reconciliation counts: {@code Findings} lists
   * them (up to the table's sample) rather than counting them, so their counts read at most this.
   */
  int COUNTED = 1000;

  /** The examples of each kind the endpoint shows. */
  int EXAMPLES = 20;

  /**
   * {@link Reconciliation#check} of {@code table} (its unknown outcomes are left out: the gauge
   * {@code idem.unknown.outcomes} and the endpoint's own list show them), as check {@code
   * reconcile:<name>}.
   */
  static ScheduledCheck reconcile(String name, Reconciliation reconciliation, EffectTable table) {
    EffectTable counted = table.withSample(COUNTED);
    return of("reconcile:" + name, lease -> {
      Findings f = reconciliation.check(counted);
      Map<String, Long> counts = new LinkedHashMap<>();
      counts.put(DUPLICATE_EFFECT, (long) f.duplicates().size());
      counts.put(EFFECT_WITHOUT_KEY, f.effectsWithoutKey());
      counts.put(KEY_WITHOUT_EFFECT, (long) f.keysWithoutEffect().size());
      Map<String, Object> examples = new LinkedHashMap<>();
      examples.put("table", table.describe());
      examples.put("checkedAt", f.checkedAt().toString());
      examples.put(DUPLICATE_EFFECT, first(f.duplicates().stream()
          .map(d -> (Object) Map.of("key", d.key(), "effects", d.effects())).toList()));
      examples.put(EFFECT_WITHOUT_KEY, first(f.effectsWithoutKeySample()));
      examples.put(KEY_WITHOUT_EFFECT, first(f.keysWithoutEffect()));
      return new CheckResult(counts, examples);
    });
  }

  private static <T> List<T> first(List<T> list) {
    return list.size() <= EXAMPLES ? list : list.subList(0, EXAMPLES);
  }
}
