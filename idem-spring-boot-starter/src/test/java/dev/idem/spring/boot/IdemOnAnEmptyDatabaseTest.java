package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TimedKeys;
import java.time.LocalDate;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.FilteredClassLoader;

/**
 * What the starter's context does to a database no context has touched: idem's migrations beside
 * the application's own Flyway, the start-up check without idem-flyway, the partitioned layout.
 * Each test needs such a database of its own, so each is a {@code @Nested} class with one:
 * {@link IdemTest} gives each annotated {@code @Nested} class of a class without it a database of
 * its own (under an annotated class it would share that class's).
 */
class IdemOnAnEmptyDatabaseTest {
  @Nested
  @IdemTest(migrate = false)
  class BesideTheApplicationsOwnFlyway {
    @Test
    void idemsMigrationsRunBesideTheApplicationsOwnFlywayEachWithItsHistory(TestDatabase fresh) {
      IdemAutoConfigurationTest.runner(fresh)
          .withPropertyValues("spring.flyway.enabled=true", "spring.flyway.locations=classpath:db/app").run(ctx -> {
            assertThat(ctx).hasNotFailed();
            assertThat(fresh.count("SELECT count(*) FROM public.flyway_schema_history WHERE success AND script = 'V1__orders.sql'")).isEqualTo(1);
            assertThat(fresh.count("SELECT count(*) FROM public.flyway_schema_history WHERE script LIKE '%idem%'")).isZero();
            assertThat(fresh.count("SELECT count(*) FROM idem.idem_schema_history WHERE success")).isPositive();
            assertThat(fresh.count("SELECT count(*) FROM idem.idem_schema_history WHERE script = 'V1__orders.sql'")).isZero();
          });
    }
  }

  @Nested
  @IdemTest(migrate = false)
  class WithoutIdemFlyway {
    @Test
    void withoutIdemFlywayStartUpChecksTheTablesAndSaysHowToGetThem(TestDatabase fresh) {
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader(IdemFlyway.class))
          .run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining("add the dependency dev.idem:idem-flyway");
          });
      assertThat(fresh.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'")).isZero();
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader(IdemFlyway.class))
          .withPropertyValues("idem.migrate.enabled=false")
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class));
    }
  }

  @Nested
  @IdemTest(migrate = false)
  class PartitionedLayout {
    @Test
    void thePartitionedLayoutIsChosenByAPropertyAndTheExpiryScheduleMaintainsItsPartitions(TestDatabase fresh) {
      IdemAutoConfigurationTest.runner(fresh)
          .withPropertyValues("idem.migrate.layout=partitioned", "idem.expiry.interval=100ms").run(ctx -> {
            assertThat(fresh.count("SELECT count(*) FROM pg_partitioned_table WHERE partrelid IN"
                + " ('idem.idem_keys'::regclass, 'idem.idem_inbox'::regclass)")).isEqualTo(2);
            // a day the migration did not create, older than the partitions it creates: the schedule drops it
            fresh.execute(TimedKeys.keyPartitionOf(LocalDate.of(2000, 1, 1)));
            Poll.until("the old empty partition dropped",
                () -> fresh.count("SELECT count(*) FROM pg_class WHERE relname = 'idem_keys_p20000101'") == 0);
          });
    }
  }
}
