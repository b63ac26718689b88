package dev.idem.spring.boot;

import dev.idem.flyway.IdemFlyway;
import javax.sql.DataSource;
import org.springframework.beans.factory.InitializingBean;

/**
 * Runs idem's migrations when the context starts, before the {@code Idem} bean is made, with
 * Flyway and a history table of idem's own ({@code idem_schema_history} in idem's schema): the
 * application's own Flyway and its history are not touched. Spring Boot treats it as a database
 * initializer, so beans that wait for the database's initialization wait for it too. The layout of
 * the key table and the inbox is {@code idem.migrate.layout}. The schema is {@code idem.schema},
 * else idem-flyway's default: {@code idem} on PostgreSQL, the DataSource's own database on MariaDB.
 *
 * <p>Start-up fails with a message naming the fix, before anything is migrated, on a database idem
 * does not run on (MySQL among them, until it is tested), on MariaDB when neither {@code
 * idem.schema} nor the URL names a database, or when the partitioned layout is asked for on
 * MariaDB, which has only the default one; and when Flyway cannot migrate the database for want of
 * its database module ({@code flyway-database-postgresql}, {@code flyway-mysql}).
 */
public final class IdemMigrations implements InitializingBean {
  private final DataSource dataSource;
  private final String schema;
  private final IdemProperties.Layout layout;

  IdemMigrations(DataSource dataSource, String schema, IdemProperties.Layout layout) {
    this.dataSource = dataSource;
    this.schema = schema;
    this.layout = layout;
  }

  @Override
  public void afterPropertiesSet() {
    // Asked first, so a setting the database cannot honour is refused naming the property, before
    // Flyway writes anything (MariaDB's DDL is not transactional).
    StartupDatabase db = StartupDatabase.of(dataSource);
    StartupDatabase.Vendor vendor = db.requireSupported();
    if (vendor == StartupDatabase.Vendor.MARIADB) {
      db.databaseFor(schema);
      if (layout == IdemProperties.Layout.PARTITIONED) {
        throw new IdemSetupException("idem.migrate.layout=partitioned is PostgreSQL's only (PostgreSQL's declarative"
            + " partitioning), and the application's DataSource is on " + vendor.product,
            "Remove idem.migrate.layout (or set it to default), the one layout on " + vendor.product + ".");
      }
    }
    try {
      IdemFlyway.migrate(dataSource, schema,
          layout == IdemProperties.Layout.PARTITIONED ? IdemFlyway.Layout.PARTITIONED : IdemFlyway.Layout.DEFAULT);
    } catch (RuntimeException e) {
      // Flyway 10+ ships each database apart from flyway-core; without this one's module it fails
      // saying only that no database handles the URL. Said here only when that module is really
      // missing from the class loader IdemFlyway hands Flyway to find its database modules with
      // (caught as any RuntimeException: the starter compiles without Flyway, which is optional).
      if (!vendor.flywaySupportPresent(IdemFlyway.class.getClassLoader())) {
        throw new IdemSetupException("Flyway is on the class path but cannot migrate " + vendor.product
            + " without its database module " + vendor.flywayModule + " (" + e.getMessage() + ")",
            "Add the dependency " + vendor.flywayModule + " (its version is Flyway's, which Spring Boot manages),"
                + " or set idem.migrate.enabled=false and run idem's migrations (" + vendor.migrations()
                + ") with your own tool.", e);
      }
      throw e;
    }
  }
}
