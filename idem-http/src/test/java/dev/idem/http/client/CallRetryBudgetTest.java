package dev.idem.http.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The budget's arithmetic, on a clock the test moves (the HTTP tests use the real one). */
class CallRetryBudgetTest {
  final AtomicLong nanos = new AtomicLong(-5_000_000_000L); // nanoTime may be negative
  final CallRetryBudget budget = CallRetryBudget.of(0.1, 2, Duration.ofSeconds(10), nanos::get);

  void firsts(int n) {
    for (int i = 0; i < n; i++) {
      budget.firstAttempt();
    }
  }

  int retriesAllowed() {
    int allowed = 0;
    while (budget.tryRetry()) {
      allowed++;
    }
    return allowed;
  }

  @Test
  void theFloorAndTenPercentOfFirstAttempts() {
    assertThat(retriesAllowed()).isEqualTo(2);
    firsts(30);
    assertThat(retriesAllowed()).isEqualTo(3);
    firsts(9);
    assertThat(retriesAllowed()).isZero();
    firsts(1);
    assertThat(retriesAllowed()).isEqualTo(1);
    assertThat(budget.firstAttempts()).isEqualTo(40);
    assertThat(budget.retries()).isEqualTo(6);
    assertThat(budget.refused()).isEqualTo(4);
  }

  @Test
  void firstAttemptsAndRetriesLeaveTheWindow() {
    firsts(100);
    assertThat(retriesAllowed()).isEqualTo(12);
    nanos.addAndGet(Duration.ofSeconds(5).toNanos());
    assertThat(retriesAllowed()).as("all still in the window").isZero();
    nanos.addAndGet(Duration.ofSeconds(6).toNanos());
    assertThat(retriesAllowed()).as("the window has moved past them all: the floor again").isEqualTo(2);
  }

  @Test
  void badValuesAreRefused() {
    assertThatThrownBy(() -> CallRetryBudget.of(1.5, 1, Duration.ofSeconds(1))).hasMessageContaining("ratio must be 0 to 1");
    assertThatThrownBy(() -> CallRetryBudget.of(Double.NaN, 1, Duration.ofSeconds(1))).hasMessageContaining("ratio");
    assertThatThrownBy(() -> CallRetryBudget.of(0.1, -1, Duration.ofSeconds(1))).hasMessageContaining("floor must not be negative");
    assertThatThrownBy(() -> CallRetryBudget.of(0.1, 1, Duration.ofMillis(1))).hasMessageContaining("window must be 10 ms to 1 hour");
    CallRetryBudget standard = CallRetryBudget.standard();
    assertThat(standard.ratio()).isEqualTo(0.1);
    assertThat(standard.floor()).isEqualTo(10);
    assertThat(standard.window()).isEqualTo(Duration.ofSeconds(10));
  }
}
