package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.reconcile.Findings;
import dev.idem.jdbc.reconcile.ProviderFindings;
import java.sql.Connection;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/**
 * Each of the seed's "Things to try" as a run of the lab, asserting the counts the lab read from
 * the database (payment rows in the service, charges at the provider, receipt emails) and which
 * guard caught the repeats. Every run also checks its meters and its reconciliation against the
 * database it left ({@link #checked}).
 */
class ScenariosTest {

  private static RunResult run(String name) throws Exception {
    Scenario s = Scenario.named(name).orElseThrow();
    return checked(s.name(), s.setup());
  }

  /**
   * Runs the lab and compares, with the database the run left: the duplicate intents
   * reconciliation found with the orders that have more than one payment row, and the meters'
   * {@code idem.applied} per source with the rows idem keeps for it (the executor's keys of its
   * scope, an inbox's message ids of its consumer; nothing in the lab expires or rolls them back).
   */
  private static RunResult checked(String name, Setup setup) throws Exception {
    Map<String, Long> duplicateOrders = new TreeMap<>();
    Map<String, Long> rowsBySource = new TreeMap<>();
    RunResult r = Lab.run(name, setup, (ds, lab) -> {
      try (Connection c = ds.getConnection()) {
        var sql = DSL.using(c, lab.dialect());
        sql.fetch("SELECT order_id, count(*) FROM " + lab.shop("payments") + " GROUP BY order_id HAVING count(*) > 1")
            .forEach(row -> duplicateOrders.put(row.get(0, String.class), row.get(1, Long.class)));
        // concat(), not ||: MariaDB reads || as OR
        sql.fetch("SELECT 'executor:payments', count(*) FROM idem_keys WHERE scope = ?"
                + " UNION ALL SELECT concat('inbox:', consumer), count(*) FROM idem_inbox GROUP BY consumer",
                PaymentsService.KEY_SCOPE)
            .forEach(row -> rowsBySource.put(row.get(0, String.class), row.get(1, Long.class)));
      }
    });
    assertThat(r.findings().duplicates().stream().collect(Collectors.toMap(Findings.Duplicate::key, Findings.Duplicate::effects)))
        .isEqualTo(duplicateOrders);
    assertThat(r.breaksLine()).startsWith("breaks scenario=" + name + " duplicate_intents=" + duplicateOrders.size() + " ");
    Map<String, Long> applied = new TreeMap<>();
    rowsBySource.forEach((source, rows) -> applied.put(source, r.meters().getOrDefault("idem.applied{source=" + source + "}", 0L)));
    assertThat(applied).isEqualTo(rowsBySource);
    // ...and no idem.applied from a source without rows to count.
    assertThat(r.meters().keySet().stream().filter(m -> m.startsWith("idem.applied{")))
        .allMatch(m -> rowsBySource.containsKey(m.substring("idem.applied{source=".length(), m.length() - 1)));
    return r;
  }

  @Test
  void nothingBrokenNothingGuarded_oneOfEach() throws Exception {
    RunResult r = checked("quiet", Setup.of("none", "none"));
    assertThat(r.summaryLine()).isEqualTo("scenario=quiet payment_rows=1 charges=1 receipts=1");
    assertThat(r.findings().provider().orElseThrow().clean()).isTrue(); // one charge, for the order's payment
  }

  @Test
  void clientRetriesWithAFreshKey_onlyTheServiceGuarded_duplicate() throws Exception {
    RunResult r = run("client-fresh-key");
    assertThat(r.summaryLine()).isEqualTo("scenario=client-fresh-key payment_rows=2 charges=2 receipts=2");
    assertThat(r.faultsFired()).containsEntry(Hop.APP, 1);
    assertThat(r.caught(Hop.SERVICE)).isZero(); // two keys: nothing for the key table to recognise
  }

  @Test
  void clientRetriesWithTheSameKey_duplicateGone() throws Exception {
    RunResult r = run("client-same-key");
    assertThat(r.summaryLine()).isEqualTo("scenario=client-same-key payment_rows=1 charges=1 receipts=1");
    assertThat(r.caught(Hop.SERVICE)).isEqualTo(1);
  }

  @Test
  void balancerRetriesAPost_duplicate() throws Exception {
    RunResult r = run("balancer-retries-post");
    assertThat(r.summaryLine()).isEqualTo("scenario=balancer-retries-post payment_rows=2 charges=2 receipts=2");
    assertThat(r.faultsFired()).containsEntry(Hop.BALANCER, 1);
    assertThat(r.findings().duplicates()).isNotEmpty(); // unguarded: reconciliation shows the break
  }

  @Test
  void neverRetryAPost_theDuplicateMovesToTheApp() throws Exception {
    RunResult r = run("balancer-504-fresh-key");
    assertThat(r.summaryLine()).isEqualTo("scenario=balancer-504-fresh-key payment_rows=2 charges=2 receipts=2");
    assertThat(r.caught(Hop.BALANCER)).isEqualTo(1); // it answered 504 instead of retrying
    assertThat(r.caught(Hop.SERVICE)).isZero(); // the app's retry came with a fresh key
  }

  @Test
  void neverRetryAPost_theAppsKeyAbsorbsItsRetry() throws Exception {
    RunResult r = run("balancer-504-same-key");
    assertThat(r.summaryLine()).isEqualTo("scenario=balancer-504-same-key payment_rows=1 charges=1 receipts=1");
    assertThat(r.caught(Hop.BALANCER)).isEqualTo(1);
    assertThat(r.caught(Hop.SERVICE)).isEqualTo(1);
  }

  @Test
  void workerCrashesAfterTheCharge_inboxOnly_twoCharges() throws Exception {
    RunResult r = run("worker-crash-inbox-only");
    assertThat(r.summaryLine()).isEqualTo("scenario=worker-crash-inbox-only payment_rows=1 charges=2 receipts=2");
    assertThat(r.caught(Hop.QUEUE)).isZero(); // the crash rolled the inbox row back with everything else
    // one payment row, so the service's side is clean; the provider's records show the double charge
    assertThat(r.findings().duplicates()).isEmpty();
    ProviderFindings p = r.findings().provider().orElseThrow();
    assertThat(p.effects()).isEqualTo(r.charges()); // the charges read from the provider's table
    assertThat(p.duplicates()).singleElement().satisfies(d -> {
      assertThat(d.intent()).isEqualTo(Lab.ORDER);
      assertThat(d.effects()).hasSize(2);
      assertThat(d.amount()).isEqualTo(2L * Lab.AMOUNT_CENTS);
    });
    assertThat(p.effectsWithoutKeyCount()).isZero();
    assertThat(r.findings().clean()).isFalse();
    assertThat(r.providerBreaksLine()).isEqualTo("provider-breaks scenario=worker-crash-inbox-only charges=2"
        + " double_charged_intents=1 charges_without_key=0 keys_without_charge=0");
  }

  @Test
  void workerCrashesAfterTheCharge_providerKey_oneCharge() throws Exception {
    RunResult r = run("worker-crash-provider-key");
    assertThat(r.summaryLine()).isEqualTo("scenario=worker-crash-provider-key payment_rows=1 charges=1 receipts=1");
    assertThat(r.caught(Hop.PROVIDER)).isEqualTo(1);
  }

  @Test
  void everyHopBroken_onlyTheWebhookGuarded_sixChargesSixReceipts() throws Exception {
    RunResult r = run("all-broken-webhook-only");
    assertThat(r.summaryLine()).isEqualTo("scenario=all-broken-webhook-only payment_rows=3 charges=6 receipts=6");
    assertThat(r.faultsFired()).hasSize(Hop.values().length); // every fault fired once
    assertThat(r.caught(Hop.WEBHOOK)).isEqualTo(1); // the one redelivered event; the six are different events
  }

  @Test
  void everyHopBroken_everyGuardOn_oneOfEach() throws Exception {
    RunResult r = run("all-broken-all-guards");
    assertThat(r.summaryLine()).isEqualTo("scenario=all-broken-all-guards payment_rows=1 charges=1 receipts=1");
    assertThat(r.faultsFired()).hasSize(Hop.values().length);
    assertThat(r.caught(Hop.BALANCER)).isEqualTo(1);
    assertThat(r.caught(Hop.SERVICE)).isEqualTo(1);
    assertThat(r.caught(Hop.QUEUE)).isEqualTo(2); // the relay's republish and the lost ack
    assertThat(r.caught(Hop.PROVIDER)).isEqualTo(1);
    assertThat(r.caught(Hop.WEBHOOK)).isEqualTo(1);
    assertThat(r.findings().clean()).isTrue(); // every guard on: reconciliation finds no break
  }
}
