package dev.idem.spring.boot;

import java.util.Set;
import org.springframework.boot.sql.init.dependency.AbstractBeansOfTypeDatabaseInitializerDetector;

/** Tells Spring Boot that {@link IdemMigrations} initializes the database (see spring.factories). */
final class IdemMigrationsDetector extends AbstractBeansOfTypeDatabaseInitializerDetector {
  @Override
  protected Set<Class<?>> getDatabaseInitializerBeanTypes() {
    return Set.of(IdemMigrations.class);
  }
}
