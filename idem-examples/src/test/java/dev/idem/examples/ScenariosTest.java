package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Each of the seed's "Things to try" as a run of the lab, asserting the counts the lab read from
 * the database (payment rows in the service, charges at the provider, receipt emails) and which
 * guard caught the repeats.
 */
class ScenariosTest {

  private static RunResult run(String name) throws Exception {
    return Scenario.named(name).orElseThrow().run();
  }

  @Test
  void nothingBrokenNothingGuarded_oneOfEach() throws Exception {
    RunResult r = Lab.run("quiet", Setup.of("none", "none"));
    assertThat(r.summaryLine()).isEqualTo("scenario=quiet payment_rows=1 charges=1 receipts=1");
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
  }
}
