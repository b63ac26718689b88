package dev.idem.spring.boot;

import org.springframework.boot.autoconfigure.AutoConfigurationImportFilter;
import org.springframework.boot.autoconfigure.AutoConfigurationMetadata;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;

/**
 * JPA is on the starter's test class path for {@link IdemJpaTest} only: every other test's
 * application runs without Boot's Hibernate and Spring Data JPA auto-configurations (so on
 * DataSourceTransactionManager, as an application without JPA does), whatever it sets in {@code
 * spring.autoconfigure.exclude}. An application with {@code idem.test.jpa=true} gets them. By
 * simple name: Boot 4 moved the classes.
 */
public final class JpaOnlyWhenAsked implements AutoConfigurationImportFilter, EnvironmentAware {
  private Environment environment;

  @Override
  public void setEnvironment(Environment environment) {
    this.environment = environment;
  }

  @Override
  public boolean[] match(String[] autoConfigurationClasses, AutoConfigurationMetadata metadata) {
    boolean jpa = environment != null && environment.getProperty("idem.test.jpa", Boolean.class, false);
    boolean[] matches = new boolean[autoConfigurationClasses.length];
    for (int i = 0; i < autoConfigurationClasses.length; i++) {
      String name = autoConfigurationClasses[i];
      matches[i] = jpa || name == null || !(name.endsWith(".HibernateJpaAutoConfiguration")
          || name.endsWith(".JpaRepositoriesAutoConfiguration") || name.endsWith(".DataJpaRepositoriesAutoConfiguration"));
    }
    return matches;
  }
}
