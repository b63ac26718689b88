package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.micrometer.IdemGauges;
import dev.idem.micrometer.IdemMetrics;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** idem's meters in a real Spring context on a real PostgreSQL: they appear after a call, and back off without idem-micrometer. */
@IdemTest
class IdemMetricsAutoConfigurationTest {
  final TestDatabase db;

  IdemMetricsAutoConfigurationTest(TestDatabase db) {
    this.db = db;
  }

  ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db).withUserConfiguration(Registry.class);
  }

  /** The application's own registry. */
  @Configuration(proxyBeanMethods = false)
  static class Registry {
    @Bean
    SimpleMeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  @Test
  void metersAppearAfterACallAndTheIdemGaugesRefreshOnTheirSchedule() {
    runner().withPropertyValues("idem.metrics.gauges-refresh=1h").run(ctx -> {
      assertThat(ctx).hasNotFailed().hasSingleBean(IdemMetrics.class).hasSingleBean(IdemGauges.class);
      MeterRegistry registry = ctx.getBean(MeterRegistry.class);
      IdempotentExecutor executor = ctx.getBean(Idem.class).executor().name("executor:starter-metrics").build();
      IdempotencyKey key = IdempotencyKey.of("starter-metrics", "k1");
      for (int i = 0; i < 3; i++) {
        executor.execute(key, Fingerprint.ofFields(Map.of("n", 1)), Codec.utf8(), tx -> "ok");
      }
      assertThat(registry.get(IdemMetrics.APPLIED).tag("source", "executor:starter-metrics").counter().count())
          .isEqualTo(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'starter-metrics'")).isEqualTo(1);
      assertThat(registry.get(IdemMetrics.REPEATS).tags("source", "executor:starter-metrics", "kind", "replayed").counter().count())
          .isEqualTo(2);
      assertThat(ctx.getBean(IdemGauges.class).refresh()).isTrue();
      assertThat(registry.get(IdemGauges.PENDING).gauge().value())
          .isEqualTo(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'P'"));
    });
  }

  @Test
  void inTheDebeziumLayoutTheBacklogGaugeIsTheSlotLag() {
    runner().withPropertyValues("idem.metrics.gauges-refresh=1h", "idem.outbox-layout=debezium",
        "idem.metrics.debezium-slot=no_such_slot").run(ctx -> {
      assertThat(ctx).hasNotFailed().hasSingleBean(IdemGauges.class);
      MeterRegistry registry = ctx.getBean(MeterRegistry.class);
      assertThat(registry.find(IdemGauges.PENDING).gauge()).isNull();
      // this server has no such slot: the refresh fails and says so, the gauge shows NaN, never 0
      assertThat(ctx.getBean(IdemGauges.class).refresh()).isFalse();
      assertThat(registry.get(IdemGauges.SLOT_LAG).gauge().value()).isNaN();
    });
  }

  @Test
  void withoutIdemMicrometerNothingIsAdded() {
    runner().withClassLoader(new FilteredClassLoader("dev.idem.micrometer")).run(ctx -> {
      assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).doesNotHaveBean("idemMetrics").doesNotHaveBean("idemIdemGauges");
    });
  }
}
