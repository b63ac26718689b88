package dev.idem.spring.boot;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.micrometer.IdemMetrics;
import dev.idem.micrometer.IdemGauges;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * idem's meters (module {@code idem-micrometer}) on the application's {@link MeterRegistry}, when
 * both are on the class path and a registry exists (Actuator makes one). See docs/operations.md.
 *
 * <p>{@link IdemMetrics} is an {@code IdemListener} bean, so the {@code Idem} bean of {@link
 * IdemAutoConfiguration} delivers its events to it (after Spring's transaction commits, like every
 * listener bean). {@link IdemGauges} refreshes the outbox's backlog and the unknown
 * outcomes every {@code idem.metrics.gauges-refresh} (default 30 s) and is closed with the
 * context. Each bean backs off when the application defines its own. The relay's publisher is not
 * wrapped: to trace publishes, give the starter {@code ObservedPublisher.wrap(publisher,
 * observationRegistry)} as its {@code Publisher} bean.
 *
 * <p>Ordered after Boot's metrics auto-configuration (so {@code @ConditionalOnBean(MeterRegistry)}
 * sees the registry, as Boot's own metrics binders do) and after {@link IdemAutoConfiguration} (so
 * the gauges see its {@code Idem}); the listener is still found, since {@code Idem} looks its
 * listeners up when it is created, not when its configuration is read.
 */
@AutoConfiguration(after = IdemAutoConfiguration.class, afterName = {
    "org.springframework.boot.actuate.autoconfigure.metrics.MetricsAutoConfiguration",
    "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
    "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
    "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration"})
@ConditionalOnClass(name = {"io.micrometer.core.instrument.MeterRegistry", "dev.idem.micrometer.IdemMetrics"})
@ConditionalOnBean(MeterRegistry.class)
public class IdemMetricsAutoConfiguration {

  /** How often the gauges query: a duration ({@code 30s}, {@code 1m}); default 30 s. */
  static final String GAUGES_REFRESH = "idem.metrics.gauges-refresh";

  /**
   * With {@code idem.outbox-layout=debezium}: the Debezium connector's replication slot, whose lag
   * is the outbox's backlog gauge; default {@code idem_outbox}, {@code DebeziumOutbox}'s default.
   */
  static final String DEBEZIUM_SLOT = "idem.metrics.debezium-slot";

  /** Counters, timers and distributions of idem's events. */
  @Bean
  @ConditionalOnMissingBean
  public IdemMetrics idemMetrics(MeterRegistry registry) {
    return IdemMetrics.of(registry);
  }

  /** The outbox's backlog and the unknown outcomes, queried on a schedule, never per scrape. */
  @Bean
  @ConditionalOnBean(Idem.class)
  @ConditionalOnMissingBean
  public IdemGauges idemGauges(Idem idem, MeterRegistry registry, Environment environment) {
    // Bound with Boot's Binder, not @Value: "30s" becomes a Duration only through Boot's conversion
    // service, which a context not started by SpringApplication (a test's context runner) lacks.
    Binder binder = Binder.get(environment);
    Duration refresh = binder.bind(GAUGES_REFRESH, Duration.class).orElse(IdemGauges.DEFAULT_INTERVAL);
    if (binder.bind("idem.outbox-layout", OutboxLayout.class).orElse(OutboxLayout.POLLED) == OutboxLayout.DEBEZIUM) {
      // the backlog is the connector's replication slot's, not idem_outbox's (which stays empty)
      return IdemGauges.startForDebezium(idem.operations(), registry, refresh,
          binder.bind(DEBEZIUM_SLOT, String.class).orElse("idem_outbox"));
    }
    return IdemGauges.start(idem.operations(), registry, refresh);
  }

  /** The scheduled checks' findings, runs and failures ({@code idem.checks.*}), when they run. */
  @Bean(destroyMethod = "close")
  @ConditionalOnBean(IdemChecks.class)
  @ConditionalOnMissingBean
  IdemChecksMeters idemChecksMeters(IdemChecks checks, MeterRegistry registry) {
    return new IdemChecksMeters(checks, registry);
  }
}
