package dev.idem.spring.testing;

import dev.idem.testing.TestDatabase;
import java.util.Map;
import org.springframework.beans.factory.support.DefaultSingletonBeanRegistry;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.MapPropertySource;
import org.springframework.test.context.ContextCustomizer;
import org.springframework.test.context.MergedContextConfiguration;

/**
 * Points the application at a database of its own, made when Spring builds the context and
 * dropped when Spring closes it. All instances are equal, so they never split Spring's context
 * cache: a database is made per context, not per test class.
 */
final class IdemTestContextCustomizer implements ContextCustomizer {
  static final String PROPERTY_SOURCE = "idemTestDatabase";

  @Override
  public void customizeContext(ConfigurableApplicationContext context, MergedContextConfiguration merged) {
    // The run's database, as idem's own tests get it: PostgreSQL, or MariaDB (TestDatabase says how it is chosen).
    TestDatabase db = TestDatabase.newDatabase(merged.getTestClass().getSimpleName());
    // First, so it wins over application.properties and the test's own properties: the point of
    // the annotation is that the application runs on this database.
    context.getEnvironment().getPropertySources().addFirst(new MapPropertySource(PROPERTY_SOURCE,
        Map.of("spring.datasource.url", db.jdbcUrl())));
    context.getBeanFactory().registerSingleton("idemTestDatabase", db);
    context.getBeanFactory().addBeanPostProcessor(new FaultyDataSources());
    context.getBeanFactory().registerSingleton("idemServiceRepeats", new ServiceRepeats(context.getBeanFactory()));
    // Spring destroys beans in the reverse order of their registration: registered before the
    // application's, the drop runs after its pool is closed, so it finds no session to end.
    if (!(context.getBeanFactory() instanceof DefaultSingletonBeanRegistry registry)) {
      db.close();
      throw new IllegalStateException("@AutoConfigureIdemTest needs a context whose bean factory is Spring's default one, not a "
          + context.getBeanFactory().getClass().getName());
    }
    registry.registerDisposableBean("idemTestDatabaseDrop", db::close);
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof IdemTestContextCustomizer;
  }

  @Override
  public int hashCode() {
    return IdemTestContextCustomizer.class.hashCode();
  }
}
