package dev.idem.spring.boot;

import java.util.Set;
import org.springframework.boot.sql.init.dependency.AbstractBeansOfTypeDatabaseInitializerDetector;

/**
 * Tells Spring Boot that {@link IdemMigrations} initializes the database (see spring.factories),
 * after the application's own Flyway: Boot runs the initializers of one detector after those of
 * the detectors ordered before it, and its Flyway's detector is ordered 1. On MariaDB idem's tables
 * go in the application's own database by default, and Flyway refuses to start a history in a
 * database that holds tables already (Boot's Flyway would refuse one that held idem's); idem's
 * migrations, run second, start theirs beside the application's tables. On PostgreSQL the two
 * schemas are apart and the order changes nothing.
 */
final class IdemMigrationsDetector extends AbstractBeansOfTypeDatabaseInitializerDetector {
  /** After Boot's FlywayMigrationInitializerDatabaseInitializerDetector (1). */
  static final int ORDER = 2;

  @Override
  protected Set<Class<?>> getDatabaseInitializerBeanTypes() {
    return Set.of(IdemMigrations.class);
  }

  @Override
  public int getOrder() {
    return ORDER;
  }
}
