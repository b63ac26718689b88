package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.micrometer.IdemMetrics;
import java.io.File;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
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
            // where they were looked for, and the Flyway module of this database
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining(Vendors.mariadb(fresh)
                    ? "idem's tables are not in the DataSource's database " + fresh.name() : "idem's tables are not in schema idem")
                .hasStackTraceContaining("put Flyway on the class path (org.flywaydb:" + (Vendors.mariadb(fresh)
                    ? "flyway-mysql)" : "flyway-database-postgresql)"))
                .hasStackTraceContaining("dev/idem/jdbc/migration/" + (Vendors.mariadb(fresh) ? "mariadb" : "postgresql"));
          });
      assertThat(Vendors.idemTables(fresh)).isZero();
      IdemAutoConfigurationTest.runner(fresh).withClassLoader(new FilteredClassLoader("org.flywaydb"))
          .withPropertyValues("idem.migrate.enabled=false", "spring.flyway.enabled=true")
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).doesNotHaveBean(IdemMigrations.class)
              .doesNotHaveBean("flyway").doesNotHaveBean("flywayInitializer"));
      assertThat(fresh.count(Vendors.mariadb(fresh)
          ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE '%schema_history'"
          : "SELECT count(*) FROM pg_tables WHERE tablename LIKE '%schema_history'")).isZero();
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

  /**
   * Flyway without this database's module (Flyway 10+ ships each database apart from flyway-core,
   * and Flyway alone says only that no database handles the URL): start-up names the module,
   * flyway-mysql on MariaDB, flyway-database-postgresql on PostgreSQL, and nothing is migrated.
   * Flyway finds its modules with the class loader idem-flyway is in, so the migration runs in a
   * class loader of its own over the test class path without the modules, as in an application
   * that has flyway-core alone.
   */
  @Test
  void withFlywayButNotItsDatabaseModuleStartUpNamesTheModule() throws Throwable {
    IdemAutoConfigurationTest.onAnEmptyDatabase("starter-nomodule", fresh -> {
      List<URL> urls = new ArrayList<>();
      String path = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
      for (String entry : path.split(File.pathSeparator)) {
        String jar = Path.of(entry).getFileName().toString();
        if (!jar.startsWith("flyway-mysql") && !jar.startsWith("flyway-database-")) {
          urls.add(Path.of(entry).toUri().toURL());
        }
      }
      try (URLClassLoader flywayCoreAlone = new URLClassLoader(urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
          HikariDataSource pool = fresh.dataSource(2)) {
        Class<?> migrations = flywayCoreAlone.loadClass(IdemMigrations.class.getName());
        @SuppressWarnings({"unchecked", "rawtypes"})
        Object defaultLayout = Enum.valueOf((Class) flywayCoreAlone.loadClass(IdemProperties.Layout.class.getName()), "DEFAULT");
        Constructor<?> make = migrations.getDeclaredConstructor(DataSource.class, String.class, defaultLayout.getClass());
        make.setAccessible(true);
        Object bean = make.newInstance(pool, null, defaultLayout);
        String module = Vendors.mariadb(fresh) ? "org.flywaydb:flyway-mysql" : "org.flywaydb:flyway-database-postgresql";
        assertThatThrownBy(() -> migrations.getMethod("afterPropertiesSet").invoke(bean))
            .isInstanceOf(InvocationTargetException.class).cause()
            .satisfies(e -> assertThat(e.getClass().getSimpleName()).isEqualTo("IdemSetupException"))
            .hasMessageContaining("cannot migrate " + fresh.vendor() + " without its database module " + module)
            .hasMessageContaining("Add the dependency " + module);
      }
      assertThat(Vendors.idemTables(fresh)).isZero();
    });
  }
}
