package dev.idem.jdbc;

import dev.idem.flyway.IdemFlyway;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.util.function.UnaryOperator;
import javax.sql.DataSource;

/**
 * A test class's database with idem migrated in it, its pool and an {@link Idem} on it, plus the
 * tables that stand for the user's own. Close it to drop the database.
 *
 * @param db the database
 * @param ds a pool on it
 * @param idem built on {@code ds}, configured by the test
 */
public record TestIdem(TestDatabase db, DataSource ds, Idem idem) implements AutoCloseable {

  /**
   * A fresh database named after {@code hint}, a pool of {@code poolSize}, an {@code Idem}
   * configured by {@code configure}, idem's migrations in its schema, then {@code userTables}.
   */
  public static TestIdem start(String hint, int poolSize, UnaryOperator<Idem.Builder> configure, String... userTables) {
    TestDatabase db = TestPostgres.newDatabase(hint);
    DataSource ds = db.dataSource(poolSize);
    Idem idem = configure.apply(Idem.builder(ds)).build();
    IdemFlyway.migrate(ds, idem.schema());
    for (String table : userTables) {
      db.execute(table);
    }
    return new TestIdem(db, ds, idem);
  }

  @Override
  public void close() {
    db.close();
  }
}
