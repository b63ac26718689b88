package dev.idem.spring.boot;

import dev.idem.jdbc.executor.CompleterRun;
import dev.idem.jdbc.executor.OutcomeCompleter;
import dev.idem.jdbc.lease.Lease;
import dev.idem.jdbc.reconcile.EffectTable;
import dev.idem.jdbc.reconcile.Findings;
import dev.idem.jdbc.reconcile.IntentLineage;
import dev.idem.jdbc.reconcile.TwoIdsForOneIntent;
import dev.idem.jdbc.reconcile.ProviderFindings;
import dev.idem.jdbc.reconcile.ProviderRecords;
import dev.idem.jdbc.reconcile.Reconciliation;
import java.time.Duration;
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

  /** Kinds of {@link #reconcile} with a provider (exact counts). */
  String PROVIDER_DUPLICATE = "provider_duplicate";
  String PROVIDER_EFFECT_WITHOUT_KEY = "provider_effect_without_key";
  String KEY_WITHOUT_PROVIDER_EFFECT = "key_without_provider_effect";

  /** Kinds of {@link #complete}. */
  String FINISHED = "finished";
  String RELEASED = "released";
  String STILL_UNKNOWN = "still_unknown";
  String SKIPPED = "skipped";

  /**
   * {@link Reconciliation#check} of {@code table} (its unknown outcomes are left out: the gauge
   * {@code idem.unknown.outcomes} and the endpoint's own list show them), as check {@code
   * reconcile:<name>}; with the provider's side too when {@code provider} is not null, over the
   * last {@code providerRange}.
   */
  static ScheduledCheck reconcile(String name, Reconciliation reconciliation, EffectTable table,
      ProviderRecords provider, Duration providerRange) {
    EffectTable counted = table.withSample(COUNTED);
    return of("reconcile:" + name, lease -> {
      Findings f = provider == null ? reconciliation.check(counted) : reconciliation.check(counted, provider, providerRange);
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
      ProviderFindings p = f.provider().orElse(null);
      if (p != null) {
        counts.put(PROVIDER_DUPLICATE, p.duplicateCount());
        counts.put(PROVIDER_EFFECT_WITHOUT_KEY, p.effectsWithoutKeyCount());
        counts.put(KEY_WITHOUT_PROVIDER_EFFECT, p.keysUnseenCount());
        examples.put(PROVIDER_DUPLICATE, first(p.duplicates().stream()
            .map(d -> (Object) Map.of("intent", d.intent(), "effects", d.effects().size(), "amount", d.amount())).toList()));
        examples.put(PROVIDER_EFFECT_WITHOUT_KEY, first(p.effectsWithoutKey().stream().map(e -> (Object) e.id()).toList()));
        examples.put(KEY_WITHOUT_PROVIDER_EFFECT, first(p.keysUnseen().stream().map(k -> (Object) k.callKey()).toList()));
      }
      return new CheckResult(counts, examples);
    });
  }

  /** Kind of {@link #lineage}. */
  String TWO_IDS_FOR_ONE_INTENT = "two_ids_for_one_intent";

  /**
   * {@link IntentLineage#check} over the last {@code lookBack} (the schedule's interval, so each run
   * reports the intents whose latest id arrived since the one before), as check {@code lineage}:
   * intents that reached an inbox or the outbox as two or more message ids.
   */
  static ScheduledCheck lineage(IntentLineage lineage, Duration lookBack) {
    return of("lineage", lease -> {
      List<TwoIdsForOneIntent> found = lineage.check(lookBack);
      return new CheckResult(Map.of(TWO_IDS_FOR_ONE_INTENT, (long) found.size()), Map.of(TWO_IDS_FOR_ONE_INTENT,
          first(found.stream().map(t -> (Object) Map.of("hop", t.hop().name(), "at", t.at(), "intent", t.intent(),
              "messageIds", t.messageIds())).toList())));
    });
  }

  /**
   * {@link OutcomeCompleter#runOnce()} of the bean {@code name}, as check {@code complete:<name>}:
   * the keys it finished, released, left unknown and skipped in this run (all zero when another
   * instance held the completer's own lease).
   */
  static ScheduledCheck complete(String name, OutcomeCompleter completer) {
    return of("complete:" + name, lease -> {
      CompleterRun run = completer.runOnce();
      Map<String, Long> counts = new LinkedHashMap<>();
      counts.put(FINISHED, (long) run.finished());
      counts.put(RELEASED, (long) run.released());
      counts.put(STILL_UNKNOWN, (long) run.stillUnknown());
      counts.put(SKIPPED, (long) run.skipped());
      return new CheckResult(counts, Map.of("ran", run.ran()));
    });
  }

  private static <T> List<T> first(List<T> list) {
    return list.size() <= EXAMPLES ? list : list.subList(0, EXAMPLES);
  }
}
