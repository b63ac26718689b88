package dev.idem.examples;

import dev.idem.jdbc.reconcile.Findings;
import dev.idem.jdbc.reconcile.ProviderFindings;
import dev.idem.jdbc.reconcile.TwoIdsForOneIntent;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * What one run of the lab left behind, read from the database at the end: payment rows in the
 * service, card charges at the provider, receipt emails sent; plus which faults fired, which guard
 * caught how many repeats, idem's listener events, the idem-micrometer meters that moved ({@code
 * name{tags}} to count, see {@code Lab.moved}), what reconciliation found in the payments
 * by order, and the trace.
 */
public record RunResult(
    String scenario,
    Setup setup,
    int paymentRows,
    int charges,
    int receipts,
    Map<Hop, Integer> faultsFired,
    Map<Hop, Integer> caught,
    Map<String, Integer> listenerEvents,
    SortedMap<String, Long> meters,
    Findings findings,
    List<TwoIdsForOneIntent> lineage,
    List<String> trace) {

  public RunResult {
    faultsFired = Map.copyOf(faultsFired);
    caught = Map.copyOf(caught);
    listenerEvents = Map.copyOf(listenerEvents);
    meters = Collections.unmodifiableSortedMap(new TreeMap<>(meters));
    lineage = List.copyOf(lineage);
    trace = List.copyOf(trace);
  }

  /** How many repeats the guard at {@code hop} recognised. */
  public int caught(Hop hop) {
    return caught.getOrDefault(hop, 0);
  }

  /** The line scripts read: {@code scenario=<name> payment_rows=<n> charges=<n> receipts=<n>}. */
  public String summaryLine() {
    return "scenario=" + scenario + " payment_rows=" + paymentRows + " charges=" + charges + " receipts=" + receipts;
  }

  /**
   * The breaks, for scripts, beside {@link #summaryLine} (which stays as it was): {@code breaks
   * scenario=<name> duplicate_intents=<n> effects_without_key=<n> unknown_outcomes=<n>}. Keys with no
   * effect are not checked (see {@code LabSql.paymentsByOrder}), so they have no field.
   */
  public String breaksLine() {
    return "breaks scenario=" + scenario + " duplicate_intents=" + findings.duplicates().size()
        + " effects_without_key=" + findings.effectsWithoutKey() + " unknown_outcomes=" + findings.unknownOutcomes().count()
        + " two_ids_for_one_intent=" + lineage.size();
  }

  /** The findings for people: each duplicate intent with its count of payments, and the other checks. */
  public String breaksText() {
    String duplicates = findings.duplicates().stream().map(d -> d.key() + "=" + d.effects()).collect(Collectors.joining(" "));
    return "duplicate intents " + findings.duplicates().size() + (duplicates.isEmpty() ? "" : " (" + duplicates + " payments)")
        + ", effects with no key " + findings.effectsWithoutKey()
        + ", keys with no effect not checked, unknown outcomes " + findings.unknownOutcomes().count()
        + ", intents with two message ids " + lineage.size();
  }

  /**
   * The provider's breaks, for scripts: {@code provider-breaks scenario=<name> charges=<n>
   * double_charged_intents=<n> charges_without_key=<n> keys_without_charge=<n>}; all 0 but charges
   * when the runs was not checked against the provider.
   */
  public String providerBreaksLine() {
    var p = findings.provider();
    return "provider-breaks scenario=" + scenario + " charges=" + p.map(ProviderFindings::effects).orElse(0)
        + " double_charged_intents=" + p.map(ProviderFindings::duplicateCount).orElse(0L)
        + " charges_without_key=" + p.map(ProviderFindings::effectsWithoutKeyCount).orElse(0L)
        + " keys_without_charge=" + p.map(ProviderFindings::keysUnseenCount).orElse(0L);
  }

  /** The provider's breaks for people: each intent charged more than once, with its charges and what was taken. */
  public String providerBreaksText() {
    return findings.provider().map(p -> {
      String doubles = p.duplicates().stream().map(d -> d.intent() + "=" + d.effects().size() + " charges, " + d.amount() + " cents")
          .collect(Collectors.joining("; "));
      return "intents charged more than once " + p.duplicateCount() + (doubles.isEmpty() ? "" : " (" + doubles + ")")
          + ", charges with no key of ours " + p.effectsWithoutKeyCount() + ", calls the provider never charged " + p.keysUnseenCount();
    }).orElse("not checked");
  }

  /** {@code key-table=1 inbox=2}, in hop order, or {@code -}. */
  public String caughtText() {
    String text = java.util.Arrays.stream(Hop.values())
        .filter(h -> caught(h) > 0)
        .map(h -> h.guardName() + "=" + caught(h))
        .collect(Collectors.joining(" "));
    return text.isEmpty() ? "-" : text;
  }
}
