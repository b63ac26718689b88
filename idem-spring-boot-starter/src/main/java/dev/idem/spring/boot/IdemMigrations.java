package dev.idem.spring.boot;

import dev.idem.flyway.IdemFlyway;
import javax.sql.DataSource;
import org.springframework.beans.factory.InitializingBean;

/**
 * Runs idem's migrations when the context starts, before the {@code Idem} bean is made, with
 * Flyway and a history table of idem's own ({@code idem_schema_history} in idem's schema): the
 * application's own Flyway and its history are not touched. Spring Boot treats it as a database
 * initializer, so beans that wait for the database's initialization wait for it too.
 */
public final class IdemMigrations implements InitializingBean {
  private final DataSource dataSource;
  private final String schema;

  IdemMigrations(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.schema = schema;
  }

  @Override
  public void afterPropertiesSet() {
    IdemFlyway.migrate(dataSource, schema);
  }
}
