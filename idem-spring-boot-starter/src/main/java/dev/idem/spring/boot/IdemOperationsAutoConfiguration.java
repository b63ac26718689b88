package dev.idem.spring.boot;

import dev.idem.jdbc.Idem;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code idem} actuator endpoint ({@link IdemOperationsEndpoint}) when Actuator is on the class
 * path (checked by name: Actuator is optional) and there is an {@link Idem}. Available as Actuator
 * decides ({@code management.endpoint.idem.access}, exposure).
 */
@AutoConfiguration(after = IdemAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.endpoint.annotation.Endpoint")
@ConditionalOnBean(Idem.class)
public class IdemOperationsAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnAvailableEndpoint(endpoint = IdemOperationsEndpoint.class)
  IdemOperationsEndpoint idemOperationsEndpoint(Idem idem, RecentMismatches mismatches, ObjectProvider<IdemChecks> checks) {
    return new IdemOperationsEndpoint(idem.operations(), mismatches, checks);
  }

  /** The last fingerprint mismatches of this instance, for the endpoint (an idem listener). */
  @Bean
  @ConditionalOnMissingBean
  RecentMismatches idemRecentMismatches() {
    return new RecentMismatches();
  }
}
