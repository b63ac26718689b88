package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;

/**
 * The schema is named at the migration and on the builder: an Idem built on a schema that was not
 * migrated refuses its first call, naming the schema and how to migrate it, before writing anything.
 */
@IdemTest(schema = "payments", poolSize = 2, sql = "CREATE TABLE effects (k text NOT NULL)")
class SchemaNamedTwiceTest {

  @Test
  void aSchemaThatWasNotMigratedIsRefusedAtTheFirstCallNamingItAndHowToMigrate(DataSource ds, TestDatabase db, Idem migrated) {
    Idem wrong = Idem.builder(ds).schema("paymnets").build();
    IdempotencyKey key = IdempotencyKey.of("s", "k1");
    for (int i = 0; i < 2; i++) {
      assertThatThrownBy(() -> wrong.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
        tx.dsl().execute("INSERT INTO effects VALUES ('k1')");
        return "done";
      })).isInstanceOfSatisfying(DataAccessException.class, e -> assertThat(e.sqlState()).isEqualTo("42P01"))
          .hasMessageContaining("idem's tables are not in schema 'paymnets'")
          .hasMessageContaining("IdemFlyway.migrate(dataSource, \"paymnets\")");
    }
    assertThatThrownBy(() -> wrong.inbox("orders").build().receive("m1", tx -> { }))
        .isInstanceOf(DataAccessException.class).hasMessageContaining("schema 'paymnets'");
    assertThat(db.count("SELECT count(*) FROM effects")).isZero();
    // nor was the misspelt schema created (on MariaDB a schema is a database)
    assertThat(db.count(db.vendor() == TestDatabase.Vendor.MARIADB
        ? "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'paymnets'"
        : "SELECT count(*) FROM pg_namespace WHERE nspname = 'paymnets'")).isZero();

    // the schema migrated: "payments" (on MariaDB a database of the class's own, named by migrated.schema())
    Idem right = Idem.builder(ds).schema(migrated.schema()).build();
    assertThat(right.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO effects VALUES ('k1')");
      return "done";
    }).applied()).isTrue();
    assertThat(db.count("SELECT count(*) FROM effects")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM " + migrated.schema() + ".idem_keys k WHERE k.scope = 's' AND k.key = 'k1'"))
        .isEqualTo(1);
  }
}
