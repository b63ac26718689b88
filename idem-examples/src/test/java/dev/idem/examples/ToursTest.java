package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The smaller tours, asserting what they read back from the database. */
class ToursTest {

  @Test
  void shipment_aRepeatOrLateStepIsAlreadyDone_aSideStateIsAConflict_oneRacerWins() throws Exception {
    Tours.Result r = Tours.result("shipment");
    assertThat(r.count("s1_repeat_already_done")).isEqualTo(1);
    assertThat(r.count("s1_late_already_done")).isEqualTo(1);
    assertThat(r.count("s1_delivered")).isEqualTo(1); // the late message did not move it back
    assertThat(r.count("s3_conflict")).isEqualTo(1);
    assertThat(r.count("s4_applied")).isEqualTo(1);
    assertThat(r.count("s4_already_done")).isEqualTo(1);
    assertThat(r.count("s4_version")).isEqualTo(1);
  }

  @Test
  void keys_childAndSlotKeysAreStable_attemptsAndOperationsDiffer_badInputRefused() throws Exception {
    Tours.Result r = Tours.result("keys");
    assertThat(r.count("child_stable")).isEqualTo(1);
    assertThat(r.count("attempts_differ")).isEqualTo(1);
    assertThat(r.count("operations_differ")).isEqualTo(1);
    assertThat(r.count("slot_stable")).isEqualTo(1);
    assertThat(r.count("refused")).isEqualTo(2);
  }

  @Test
  void retention_pastTheProvidersWindowABlindRetryChargesAgain_aLookUpByReferenceDoesNot() throws Exception {
    Tours.Result r = Tours.result("retention");
    assertThat(r.count("blind_charges")).isEqualTo(2);
    assertThat(r.count("resolved_charges")).isEqualTo(1);
  }

  @Test
  void scheduler_theSameSlotTwiceRunsOnce_keyedByTheClockRunsTwice() throws Exception {
    Tours.Result r = Tours.result("scheduler");
    assertThat(r.count("slot_keyed_runs")).isEqualTo(1);
    assertThat(r.count("slot_keyed_applied")).isEqualTo(1);
    assertThat(r.count("clock_keyed_runs")).isEqualTo(2);
  }

  @Test
  void zombie_theStaleTokenIsRefused() throws Exception {
    Tours.Result r = Tours.result("zombie");
    assertThat(r.count("early_granted")).isZero();
    assertThat(r.count("zombie_accepted")).isZero();
    assertThat(r.count("rows")).isEqualTo(1);
    assertThat(r.count("rows_by_worker_a")).isZero();
  }
}
