package dev.idem.result;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.IdemException;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** What a call, and a recognised repeat, gets back. */
class ExecutionTest {

  @Test
  void appliedCarriesThisCallsResult() {
    Execution<String> first = new Execution.Applied<>("ch_1");
    assertThat(first.value()).isEqualTo("ch_1");
    assertThat(first.applied()).isTrue();
    assertThat(first.replayed()).isFalse();
    assertThat(first.inFlight()).isFalse();
    assertThat(new Execution.Applied<String>(null).value()).isNull(); // an effect with no result
  }

  @Test
  void replayedCarriesTheStoredFirstResultAndItsAge() {
    Instant completed = Instant.parse("2026-10-28T02:00:00Z");
    Execution<String> repeat = new Execution.Replayed<>("ch_1", completed, Duration.ofSeconds(3));
    assertThat(repeat.value()).isEqualTo("ch_1");
    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.applied()).isFalse();
    assertThat(repeat.inFlight()).isFalse();
    Execution.Replayed<String> replayed = (Execution.Replayed<String>) repeat;
    assertThat(replayed.firstCompletedAt()).isEqualTo(completed);
    assertThat(replayed.age()).isEqualTo(Duration.ofSeconds(3));
    assertThatThrownBy(() -> new Execution.Replayed<>("x", null, Duration.ZERO)).hasMessage("firstCompletedAt must not be null");
    assertThatThrownBy(() -> new Execution.Replayed<>("x", completed, null)).hasMessage("age must not be null");
    assertThatThrownBy(() -> new Execution.Replayed<>("x", completed, Duration.ofMillis(-1)))
        .hasMessage("age must not be negative, was PT-0.001S");
  }

  @Test
  void inFlightHasNoValueAndSaysWhenToRetry() {
    Execution<String> running = new Execution.InFlight<>("shop-7:chk_7f3a9c", Duration.ofSeconds(2));
    assertThat(running.inFlight()).isTrue();
    assertThat(running.applied()).isFalse();
    assertThat(running.replayed()).isFalse();
    assertThatThrownBy(running::value)
        .isInstanceOf(InFlightException.class)
        .isInstanceOf(IdemException.class)
        .hasMessage("key shop-7:chk_7f3a9c is in flight: another copy is running; retry after PT2S")
        .satisfies(e -> assertThat(((InFlightException) e).retryAfter()).isEqualTo(Duration.ofSeconds(2)));
    assertThatThrownBy(() -> new Execution.InFlight<>(null, Duration.ZERO)).hasMessage("key must not be null");
    assertThatThrownBy(() -> new Execution.InFlight<>("k", Duration.ofSeconds(-1)))
        .hasMessage("retryAfter must not be negative, was PT-1S");
  }

  @Test
  void aCallerCanHandleEveryCaseExhaustively() {
    assertThat(describe(new Execution.Applied<>(7))).isEqualTo("201 7");
    assertThat(describe(new Execution.Replayed<>(7, Instant.EPOCH, Duration.ZERO))).isEqualTo("200 7 (replayed)");
    assertThat(describe(new Execution.InFlight<>("k", Duration.ofSeconds(1)))).isEqualTo("409 Retry-After: 1");
  }

  /** A sealed interface: the compiler checks that each case is handled (no default branch). */
  private static String describe(Execution<Integer> e) {
    if (e instanceof Execution.Applied<Integer> a) {
      return "201 " + a.value();
    } else if (e instanceof Execution.Replayed<Integer> r) {
      return "200 " + r.value() + " (replayed)";
    } else if (e instanceof Execution.InFlight<Integer> f) {
      return "409 Retry-After: " + f.retryAfter().toSeconds();
    }
    throw new AssertionError(e);
  }

  @Test
  void aFingerprintMismatchIsARefusalNamingBothFingerprints() {
    IdempotencyKey key = IdempotencyKey.of("shop-7", "chk_7f3a9c");
    Fingerprint stored = Fingerprint.of("amount=4000");
    Fingerprint given = Fingerprint.of("amount=4500");
    KeyReuseException e = new KeyReuseException(key, stored, given);
    assertThat(e).isInstanceOf(IdemException.class);
    assertThat(e.key()).isEqualTo(key);
    assertThat(e.storedHex()).isEqualTo(stored.hex());
    assertThat(e.given()).isEqualTo(given);
    assertThat(e.getMessage())
        .contains("shop-7:chk_7f3a9c")
        .contains(stored.hex())
        .contains(given.hex())
        .contains("send a new key for a new request");
  }
}
