package dev.idem.spring.boot;

import dev.idem.flyway.IdemFlyway;
import javax.sql.DataSource;
import org.springframework.beans.factory.InitializingBean;

/**
 * Runs idem's migrations when the context starts, before the {@code Idem} bean is made, with
 * Flyway and a history table of idem's own ({@code idem_schema_history} in idem's schema): the
 * application's own Flyway and its history are not touched. Spring Boot treats it as a database
 * initializer, so beans that wait for the database's initialization wait for it too. The layout of
 * the key table and the inbox is {@code idem.migrate.layout}.
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
    IdemFlyway.migrate(dataSource, schema,
        layout == IdemProperties.Layout.PARTITIONED ? IdemFlyway.Layout.PARTITIONED : IdemFlyway.Layout.DEFAULT);
  }
}
