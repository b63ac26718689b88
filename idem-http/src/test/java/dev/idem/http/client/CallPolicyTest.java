package dev.idem.http.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class CallPolicyTest {

  @Test
  void theDefaults() {
    CallPolicy p = CallPolicy.DEFAULT;
    assertThat(p.header()).isEqualTo("Idempotency-Key");
    assertThat(p.maxAttempts()).isEqualTo(4);
    assertThat(p.firstBackoff()).isEqualTo(Duration.ofMillis(100));
    assertThat(p.maxBackoff()).isEqualTo(Duration.ofSeconds(2));
    assertThat(p.maxRetryAfter()).isEqualTo(Duration.ofSeconds(10));
    assertThat(p.attemptTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(p.longestCall()).isEqualTo(Duration.ofSeconds(70));
    assertThat(p.retryStatuses()).containsExactlyInAnyOrder(408, 409, 425, 429, 500, 502, 503, 504);
    assertThat(p.retryable(503)).isTrue();
    assertThat(p.retryable(501)).isFalse();
    assertThat(p.retryable(422)).isFalse();
    assertThat(p.toBuilder().build().toString()).isEqualTo(p.toString());
  }

  @Test
  void aClientErrorThatSaysTheRequestIsWrongCannotBeMadeRetryable() {
    for (int s : new int[] {400, 401, 402, 403, 404, 410, 422, 200, 302, 100, 600}) {
      assertThatThrownBy(() -> CallPolicy.builder().retryStatuses(s))
          .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("status " + s + " cannot be retried");
    }
    assertThat(CallPolicy.builder().retryStatuses(429, 501).build().retryStatuses()).containsExactlyInAnyOrder(429, 501);
    assertThat(CallPolicy.builder().retryStatuses(List.of()).build().retryStatuses()).isEmpty();
  }

  @Test
  void badValuesAreRefusedByName() {
    assertThatThrownBy(() -> CallPolicy.builder().header("Idempotency Key")).hasMessageContaining("not an HTTP field name");
    assertThatThrownBy(() -> CallPolicy.builder().header("")).hasMessageContaining("header must not be null or empty");
    assertThatThrownBy(() -> CallPolicy.builder().header("Host")).hasMessageContaining("set by the HTTP client");
    assertThatThrownBy(() -> CallPolicy.builder().maxAttempts(0)).hasMessageContaining("maxAttempts must be 1 to 10, was 0");
    assertThatThrownBy(() -> CallPolicy.builder().maxAttempts(11)).hasMessageContaining("maxAttempts must be 1 to 10, was 11");
    assertThatThrownBy(() -> CallPolicy.builder().backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .hasMessageContaining("backoff max (PT1S) must be at least first (PT2S)");
    assertThatThrownBy(() -> CallPolicy.builder().backoff(Duration.ofMillis(-1), Duration.ofSeconds(1)))
        .hasMessageContaining("backoff first must not be negative");
    assertThatThrownBy(() -> CallPolicy.builder().backoff(Duration.ZERO, Duration.ofMinutes(2)))
        .hasMessageContaining("backoff max must be at most PT1M");
    assertThatThrownBy(() -> CallPolicy.builder().maxRetryAfter(Duration.ofMinutes(6)))
        .hasMessageContaining("maxRetryAfter must be at most PT5M");
    assertThatThrownBy(() -> CallPolicy.builder().attemptTimeout(Duration.ZERO))
        .hasMessageContaining("attemptTimeout must be more than zero");
    assertThat(CallPolicy.builder().header("PayPal-Request-Id").build().header()).isEqualTo("PayPal-Request-Id");
  }

  @Test
  void theBackoffIsFullJitterUnderADoublingCeiling() {
    CallPolicy p = CallPolicy.builder().backoff(Duration.ofMillis(100), Duration.ofMillis(350)).build();
    for (int i = 0; i < 1_000; i++) {
      assertThat(p.backoff(1)).isBetween(Duration.ZERO, Duration.ofMillis(100));
      assertThat(p.backoff(2)).isBetween(Duration.ZERO, Duration.ofMillis(200));
      assertThat(p.backoff(3)).isBetween(Duration.ZERO, Duration.ofMillis(350));
      assertThat(p.backoff(200)).isBetween(Duration.ZERO, Duration.ofMillis(350));
    }
    assertThat(CallPolicy.builder().backoff(Duration.ZERO, Duration.ZERO).build().backoff(3)).isZero();
  }
}
