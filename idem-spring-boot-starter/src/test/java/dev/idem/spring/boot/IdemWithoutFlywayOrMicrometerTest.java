package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.micrometer.IdemMetrics;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.FilteredClassLoader;

/**
 * The starter brings idem-flyway and idem-micrometer without Flyway and Micrometer: an application
 * that has neither starts without them (Boot's own Flyway auto-configuration stays off), and the
 * start-up check for idem's tables still says how to get them. Read from the database.
 */
class IdemWithoutFlywayOrMicrometerTest {
  // Each test shows what a context does to a database no context has touched: a @Nested class
  // each, as @IdemTest gives each annotated @Nested class of this unannotated class a database of
  // its own (see IdemOnAnEmptyDatabaseTest).

  @Nested
  @IdemTest(migrate = false)
  class WithoutFlyway {
    @Test
    void withoutFlywayNothingMigratesAndStartUpSaysHowToGetTheTables(TestDatabase fresh) {
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader("org.flywaydb"))
          .run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining("idem's tables are not in schema idem")
                .hasStackTraceContaining("put Flyway on the class path");
          });
      assertThat(fresh.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'")).isZero();
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader("org.flywaydb"))
          .withPropertyValues("idem.migrate.enabled=false", "spring.flyway.enabled=true")
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).doesNotHaveBean(IdemMigrations.class)
              .doesNotHaveBean("flyway").doesNotHaveBean("flywayInitializer"));
      assertThat(fresh.count("SELECT count(*) FROM pg_tables WHERE tablename LIKE '%schema_history'")).isZero();
    }
  }

  @Nested
  @IdemTest(migrate = false)
  class WithoutMicrometer {
    @Test
    void withoutMicrometerTheMetersAreLeftOut(TestDatabase fresh) {
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader("io.micrometer"))
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).doesNotHaveBean(IdemMetrics.class)
              .doesNotHaveBean(IdemMetricsAutoConfiguration.class));
      assertThat(fresh.count("SELECT count(*) FROM idem.idem_schema_history WHERE success")).isPositive();
    }
  }
}
