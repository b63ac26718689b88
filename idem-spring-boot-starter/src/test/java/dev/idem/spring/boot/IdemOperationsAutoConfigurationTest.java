package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.ops.OutboxStats;
import dev.idem.jdbc.ops.UnknownOutcomes;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** The idem actuator endpoint: made over the application's Idem, and reading and acting on the real tables. */
@IdemTest
class IdemOperationsAutoConfigurationTest {
  final TestDatabase db;

  IdemOperationsAutoConfigurationTest(TestDatabase db) {
    this.db = db;
  }

  ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db).withPropertyValues("management.endpoints.web.exposure.include=idem");
  }

  @Test
  @SuppressWarnings("unchecked")
  void theEndpointReadsAndActs() {
    runner().run(ctx -> {
      assertThat(ctx).hasNotFailed().hasSingleBean(IdemOperationsEndpoint.class);
      IdemOperationsEndpoint endpoint = ctx.getBean(IdemOperationsEndpoint.class);
      db.execute("DELETE FROM idem_outbox");
      db.execute("INSERT INTO idem_outbox (id, topic, payload, status, attempts, last_error)"
          + " VALUES ('00000000-0000-7000-8000-000000000001', 'orders', " + Vendors.sql(db, "'\\x01'", "X'01'") + ", 'X', 5, 'broker down')");
      Map<String, Object> view = endpoint.view();
      UnknownOutcomes unknown = (UnknownOutcomes) view.get("unknownOutcomes");
      assertThat(List.of(unknown.count(), unknown.oldest())).containsExactly(0L, Duration.ZERO);
      OutboxStats outbox = (OutboxStats) view.get("outbox");
      assertThat(List.of(outbox.pending(), outbox.parked(), outbox.oldestPending())).containsExactly(0L, 1L, Duration.ZERO);
      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X'")).isEqualTo(1);
      assertThat((List<Object>) view.get("parked")).hasSize(1);
      assertThat((List<Object>) view.get("recentMismatches")).isEmpty();
      // a key that comes back with another request: refused, and listed newest first
      IdempotentExecutor executor = ctx.getBean(Idem.class).executor().name("executor:ops").build();
      executor.execute(IdempotencyKey.of("ops", "k-1"), Fingerprint.of("first"), Codec.utf8(), tx -> "r");
      assertThatThrownBy(() -> executor.execute(IdempotencyKey.of("ops", "k-1"), Fingerprint.of("second"), Codec.utf8(), tx -> "r"))
          .isInstanceOf(KeyReuseException.class);
      assertThat((List<RecentMismatches.Mismatch>) endpoint.view().get("recentMismatches")).singleElement()
          .satisfies(m -> assertThat(List.of(m.source(), m.scope(), m.key())).containsExactly("executor:ops", "ops", "k-1"));
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'ops' AND idem_keys.key = 'k-1'")).isEqualTo(1);
      assertThat(endpoint.act("redriveTopic", null, "orders", null, null, null, null)).containsEntry("rows", 1L);
      assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'P' AND attempts = 0")).isEqualTo(1);
      assertThat(endpoint.act("release", null, null, "s", "k", 1L, null)).containsEntry("rows", 0L);
    });
  }

  @Test
  void backsOffWithoutActuator() {
    runner().withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate.endpoint.annotation"))
        .run(ctx -> assertThat(ctx).doesNotHaveBean(IdemOperationsEndpoint.class));
  }
}
