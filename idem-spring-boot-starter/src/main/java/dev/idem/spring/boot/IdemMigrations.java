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
 * <p>Start-up fails with a message naming the fix when Flyway cannot migrate this database for
 * want of its database module ({@code flyway-database-postgresql}, {@code flyway-mysql}), or when
 * the partitioned layout is asked for on MariaDB, which has only the default one.
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
    if (layout == IdemProperties.Layout.PARTITIONED) {
      // IdemFlyway refuses it too, naming its own argument; this names the property the user set.
      StartupDatabase db = StartupDatabase.of(dataSource);
      if (db.requireSupported() != StartupDatabase.Vendor.POSTGRESQL) {
        throw new IdemSetupException("idem.migrate.layout=partitioned is PostgreSQL's only (PostgreSQL's declarative"
            + " partitioning), and the application's DataSource is on " + db.vendor().product,
            "Remove idem.migrate.layout (or set it to default), the one layout on " + db.vendor().product + ".");
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
      StartupDatabase db;
      try {
        db = StartupDatabase.of(dataSource);
      } catch (RuntimeException asking) {
        e.addSuppressed(asking); // the database is not answering: the migration's own error says more
        throw e;
      }
      if (db.vendor() == StartupDatabase.Vendor.MARIADB) {
        db.databaseFor(schema); // no database to migrate: IdemFlyway's refusal, said with the property to set
      }
      if (db.vendor() != null && !db.vendor().flywaySupportPresent(IdemFlyway.class.getClassLoader())) {
        throw new IdemSetupException("Flyway is on the class path but cannot migrate " + db.vendor().product
            + " without its database module " + db.vendor().flywayModule + " (" + e.getMessage() + ")",
            "Add the dependency " + db.vendor().flywayModule + " (its version is Flyway's, which Spring Boot manages),"
                + " or set idem.migrate.enabled=false and run idem's migrations (" + db.vendor().migrations()
                + ") with your own tool.", e);
      }
      throw e;
    }
  }
}
