package dev.idem.spring.boot;

import dev.idem.jdbc.Idem;
import dev.idem.spring.RelayLifecycle;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * {@code /actuator/health/idem} with Spring Boot 3's Actuator ({@code management.health.idem.enabled}).
 * Apart from {@link IdemAutoConfiguration} and conditional on Boot 3's health API by name, so that
 * on Spring Boot 4 (whose health API moved) this is skipped and the rest works.
 */
@AutoConfiguration(after = IdemAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
@ConditionalOnBean(Idem.class)
public class IdemHealthAutoConfiguration {

  /** Pending and parked outbox messages, and whether the relay runs. */
  @Bean
  @ConditionalOnEnabledHealthIndicator("idem")
  @ConditionalOnMissingBean(name = "idemHealthIndicator")
  HealthIndicator idemHealthIndicator(Idem idem, ObjectProvider<RelayLifecycle> relay) {
    return new IdemHealthIndicator(idem.operations(), relay.getIfAvailable());
  }
}
