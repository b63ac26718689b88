package dev.idem.spring.testing;

import dev.idem.testing.FaultyDataSource;
import javax.sql.DataSource;
import org.springframework.beans.factory.config.BeanPostProcessor;

/**
 * Puts every {@link DataSource} bean of the application behind a {@link FaultyDataSource}, so
 * {@link ServiceRepeats} can kill the commits of the application's own transactions. Unarmed, the
 * wrapper only passes calls on; {@code unwrap} still reaches the pool (Boot's pool metrics and
 * health work unchanged).
 */
final class FaultyDataSources implements BeanPostProcessor {
  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    return bean instanceof DataSource ds && !(bean instanceof FaultyDataSource) ? FaultyDataSource.wrap(ds) : bean;
  }
}
