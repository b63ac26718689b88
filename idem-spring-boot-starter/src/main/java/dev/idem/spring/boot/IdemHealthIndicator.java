package dev.idem.spring.boot;

import dev.idem.jdbc.ops.Operations;
import dev.idem.jdbc.ops.OutboxStats;
import dev.idem.spring.RelayLifecycle;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * {@code /actuator/health/idem}: the outbox's pending and parked messages, and whether the relay's
 * loop runs. DOWN when the relay should run and does not, or the database does not answer; parked
 * messages are a detail, not DOWN (a restart would not publish them: alert on them and redrive).
 */
final class IdemHealthIndicator extends AbstractHealthIndicator {
  private final Operations operations;
  private final RelayLifecycle relay;

  IdemHealthIndicator(Operations operations, RelayLifecycle relay) {
    super("idem health check failed");
    this.operations = operations;
    this.relay = relay;
  }

  @Override
  protected void doHealthCheck(Health.Builder builder) {
    OutboxStats outbox = operations.outboxStats(); // one statement for both counts
    builder.withDetail("outboxPending", outbox.pending()).withDetail("outboxParked", outbox.parked());
    if (relay == null) {
      builder.up().withDetail("relay", "none (no Publisher bean)");
    } else if (relay.isRunning()) {
      builder.up().withDetail("relay", "running");
    } else {
      builder.down().withDetail("relay", relay.isAutoStartup() ? "stopped" : "not started (auto-startup off)");
    }
  }
}
