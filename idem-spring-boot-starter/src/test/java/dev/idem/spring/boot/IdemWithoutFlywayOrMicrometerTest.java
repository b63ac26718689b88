package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.micrometer.IdemMetrics;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.FilteredClassLoader;

/**
 * The starter brings idem-flyway and idem-micrometer without Flyway and Micrometer: an application
 * that has neither starts without them (Boot's own Flyway auto-configuration stays off), and the
 * start-up check for idem's tables still says how to get them. Read from the database, each test's
 * own and empty before it ({@link IdemAutoConfigurationTest#onAnEmptyDatabase}).
 */
class IdemWithoutFlywayOrMicrometerTest {

  @Test
  void withoutFlywayNothingMigratesAndStartUpSaysHowToGetTheTables() throws Throwable {
    IdemAutoConfigurationTest.onAnEmptyDatabase("starter-noflyway", fresh -> {
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
    });
  }

  @Test
  void withoutMicrometerTheMetersAreLeftOut() throws Throwable {
    IdemAutoConfigurationTest.onAnEmptyDatabase("starter-nometer", fresh -> {
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader("io.micrometer"))
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).doesNotHaveBean(IdemMetrics.class)
              .doesNotHaveBean(IdemMetricsAutoConfiguration.class));
      assertThat(fresh.count("SELECT count(*) FROM idem_schema_history WHERE success")).isPositive();
    });
  }
}
