package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.internal.base.Sha256;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** The seed's step 6, then the rules it states as properties. */
class KeysTest {

  // The root key is made once per user intent, when the checkout screen opens, and kept on the
  // device until the intent finishes. Every key below is derived from it.
  private static final IdempotencyKey ROOT = IdempotencyKey.of("shop-7", "chk_7f3a9c");

  @Test
  void aTimedChildKeepsItsRootsUuidV7AndIsAsStableAsAChild() {
    IdempotencyKey root = IdempotencyKey.of("shop-7", "0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b");
    IdempotencyKey payment = Keys.timedChild(root, "payment");
    assertThat(payment.value()).isEqualTo("0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b." + Keys.child(root, "payment").value());
    assertThat(Keys.timedChild(root, "payment")).isEqualTo(payment);
    assertThat(Keys.timedChild(payment, "attempt/1").value()).startsWith("0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b.")
        .isNotEqualTo(Keys.timedChild(payment, "attempt/2").value());
    assertThat(payment.scope()).isEqualTo("shop-7");
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> Keys.timedChild(IdempotencyKey.of("shop-7", "order-42"), "payment"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not begin with a UUIDv7");
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> Keys.timedChild(
            IdempotencyKey.of("shop-7", "0190a5b2-3c4d-4e8f-9a0b-1c2d3e4f5a6b"), "payment")) // version 4
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("UUIDv7");
  }

  @Test
  void theSameChildKeyOnRetry() {
    IdempotencyKey order = Keys.child(ROOT, "order");
    // The retried request, on another machine after a crash, derives it again without storage.
    assertThat(Keys.child(IdempotencyKey.of("shop-7", "chk_7f3a9c"), "order")).isEqualTo(order);
    assertThat(order.scope()).isEqualTo("shop-7");
    assertThat(order.value()).hasSize(64).matches("[0-9a-f]{64}");
  }

  @Test
  void aRetriedChargeIsRecognisedAndANewCardIsANewCharge() {
    IdempotencyKey payment = Keys.child(Keys.child(ROOT, "order"), "payment");
    assertThat(Keys.attempt(payment, 1)).isEqualTo(Keys.attempt(payment, 1));
    assertThat(Keys.attempt(payment, 1)).isNotEqualTo(Keys.attempt(payment, 2));
    assertThat(Keys.attempt(payment, 1)).isEqualTo(Keys.child(payment, "attempt/1"));
  }

  @Test
  void twoEmailsOfOneOrderHaveTwoKeys() {
    IdempotencyKey order = Keys.child(ROOT, "order");
    assertThat(Keys.child(order, "email/receipt")).isNotEqualTo(Keys.child(order, "email/shipped"));
  }

  @Test
  void bothSchedulerReplicasGetOneKeyForTheSlot() {
    // Both replicas act on the run due at 2026-10-28T02:00:00Z (the seed's slot 1_793_152_800).
    Instant slot = Instant.ofEpochSecond(1_793_152_800L);
    assertThat(slot).isEqualTo(Instant.parse("2026-10-28T02:00:00Z"));
    IdempotencyKey replicaA = Keys.scheduledRun("scheduler", "nightly-invoices", slot);
    IdempotencyKey replicaB = Keys.scheduledRun("scheduler", "nightly-invoices", Instant.parse("2026-10-28T02:00:00Z"));
    assertThat(replicaA).isEqualTo(replicaB);
    assertThat(replicaA.value()).isEqualTo("nightly-invoices@2026-10-28T02:00:00Z");
    assertThat(Keys.scheduledRun("scheduler", "nightly-invoices", slot.plusSeconds(86_400))).isNotEqualTo(replicaA);
  }

  @Test
  void aSlotWithAFractionOfASecondIsAClockReadingAndIsRefused() {
    // The replica that started at 02:00:00.4 passed its clock, not the slot.
    Instant startedAt = Instant.parse("2026-10-28T02:00:00.400Z");
    assertThatThrownBy(() -> Keys.scheduledRun("scheduler", "nightly-invoices", startedAt))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("slot 2026-10-28T02:00:00.400Z has a fraction of a second")
        .hasMessageContaining("not the clock when the run started");
  }

  @Test
  void badArgumentsAreNamed() {
    assertThatThrownBy(() -> Keys.child(null, "order")).hasMessage("parent must not be null");
    assertThatThrownBy(() -> Keys.child(ROOT, " ")).hasMessage("step must not be blank (it is only whitespace)");
    assertThatThrownBy(() -> Keys.child(ROOT, "email receipt")).hasMessageStartingWith("step contains a space");
    assertThatThrownBy(() -> Keys.attempt(ROOT, 0)).hasMessage("attempt must be 1 or more, was 0");
    assertThatThrownBy(() -> Keys.scheduledRun("s", "job", null)).hasMessage("slot must not be null");
    assertThatThrownBy(() -> Keys.scheduledRun("s", "", Instant.EPOCH)).hasMessage("job must not be empty");
    assertThatThrownBy(() -> Keys.scheduledRun(" ", "job", Instant.EPOCH))
        .hasMessage("scope must not be blank (it is only whitespace)");
    assertThatThrownBy(() -> Keys.scheduledRun("s", "j".repeat(250), Instant.EPOCH))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("job is 250 characters long; with the slot the key would be 271, and at most 255 are allowed");
  }

  @Test
  void theSplitBetweenParentAndStepIsUnambiguous() {
    // Hashing parent + "/" + step alone would give these two one key.
    IdempotencyKey a = Keys.child(IdempotencyKey.of("s", "a"), "b/c");
    IdempotencyKey b = Keys.child(IdempotencyKey.of("s", "a/b"), "c");
    assertThat(a).isNotEqualTo(b);
    assertThat(a.value()).isEqualTo(Sha256.hex("1:s/1:a/b/c"));
    assertThat(b.value()).isEqualTo(Sha256.hex("1:s/3:a/b/c"));
  }

  @Test
  void aChainOfStepsIsNotTheSameAsOneStepNamedLikeTheChain() {
    IdempotencyKey viaChain = Keys.child(Keys.child(ROOT, "order"), "payment");
    assertThat(viaChain).isNotEqualTo(Keys.child(ROOT, "order/payment"));
  }

  @Test
  void theSameParentValueInTwoScopesDerivesTwoDifferentChildValues() {
    // A child key is sent to providers, which do not know our scopes: the value itself must differ.
    IdempotencyKey one = Keys.child(IdempotencyKey.of("merchant-1", "order-7"), "external");
    IdempotencyKey two = Keys.child(IdempotencyKey.of("merchant-2", "order-7"), "external");
    org.assertj.core.api.Assertions.assertThat(one.value()).isNotEqualTo(two.value());
  }
}
