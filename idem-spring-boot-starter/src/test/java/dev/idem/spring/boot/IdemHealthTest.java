package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.spring.RelayLifecycle;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.actuate.health.Status;
import org.springframework.transaction.support.TransactionTemplate;

/** {@code /actuator/health/idem} (Spring Boot 3's Actuator): the outbox's counts and the relay's state. */
@IdemTest
class IdemHealthTest {
  final TestDatabase db;

  IdemHealthTest(TestDatabase db) {
    this.db = db;
  }

  @Test
  void reportsParkedMessagesAndIsDownWhileTheRelayIsStopped() {
    IdemAutoConfigurationTest.runner(db)
        .withBean(Publisher.class, () -> m -> {
          throw new IllegalStateException("broker down");
        })
        .withPropertyValues("idem.relay.poll-interval=20ms", "idem.relay.max-attempts=1")
        .run(ctx -> {
          Outbox outbox = ctx.getBean(Outbox.class);
          ctx.getBean(TransactionTemplate.class).executeWithoutResult(s -> outbox.enqueue(NewMessage.of("orders", new byte[] {1})));
          Poll.until("the message parked", () -> ctx.getBean(Idem.class).operations().outboxStats().parked() == 1);
          HealthIndicator health = ctx.getBean("idemHealthIndicator", HealthIndicator.class);
          assertThat(health.health().getStatus()).isEqualTo(Status.UP);
          assertThat(health.health().getDetails()).containsEntry("relay", "running").containsEntry("outboxParked", 1L)
              .containsEntry("outboxPending", 0L);
          ctx.getBean(RelayLifecycle.class).stop();
          assertThat(health.health().getStatus()).isEqualTo(Status.DOWN);
        });
    IdemAutoConfigurationTest.runner(db).withPropertyValues("management.health.idem.enabled=false")
        .run(ctx -> assertThat(ctx).doesNotHaveBean("idemHealthIndicator"));
  }
}
