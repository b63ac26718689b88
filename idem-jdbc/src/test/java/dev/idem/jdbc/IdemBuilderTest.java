package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Proxies;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** What {@link Idem.Builder} builds: its schema migrated, its transactions, and the settings it refuses. */
@IdemTest(schema = "idem_custom", poolSize = 4, sql = "CREATE TABLE notes (id int PRIMARY KEY)")
class IdemBuilderTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem custom) {
    db = database;
    ds = pool;
    idem = custom;
  }

  private static int notes() {
    return idem.inTransaction(tx -> tx.dsl().fetchCount(DSL.table("notes")));
  }

  static boolean maria() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /**
   * MariaDB's tables differ as its migration says: the fence floor is a table of its own (no
   * sequence), and there is no idem_outbox_events (the Debezium layout is PostgreSQL's). There
   * idem_custom is a database of the class's own, named by idem.schema().
   */
  @Test
  void migrationsCreateTheTablesInTheConfiguredSchemaWithTheirOwnHistory() {
    List<String> tables = idem.inTransaction(tx -> tx.dsl()
        .fetch("SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1", idem.schema())
        .getValues(0, String.class));
    if (maria()) {
      assertThat(tables).containsExactly(
          "idem_breaks", "idem_fence_floor", "idem_inbox", "idem_inbox_attempts", "idem_inbox_polls", "idem_intent_keys", "idem_keys", "idem_leases", "idem_notification_caps",
          "idem_outbox", "idem_schema_history", "idem_sequences");
    } else {
      assertThat(tables).containsExactly(
          "idem_breaks", "idem_inbox", "idem_inbox_attempts", "idem_inbox_polls", "idem_intent_keys", "idem_keys", "idem_leases", "idem_notification_caps",
          "idem_outbox", "idem_outbox_events", "idem_schema_history", "idem_sequences");
    }
    IdemFlyway.migrate(ds, idem.schema()); // a second run is a no-op
    int applied = idem.inTransaction(tx -> tx.dsl().fetchCount(DSL.table(DSL.name(idem.schema(), "idem_schema_history"))));
    assertThat(applied).as("the schema's creation and the migrations V1 to V5").isEqualTo(6);
  }

  /**
   * A fresh Idem learns which database it is on at its first call; a first call that holds a
   * connection asks that one, so on a pool of one (or one every caller holds) it does not wait for
   * a second until the pool's timeout.
   */
  @Test
  void aFreshIdemsFirstTransactionOnAPoolOfOneTakesNoSecondConnection() {
    try (HikariDataSource one = PoolOfOne.of(db)) {
      Idem fresh = Idem.builder(one).schema(idem.schema()).build();
      fresh.useTransaction(tx -> tx.dsl().execute("INSERT INTO notes (id) VALUES (?)", 987_654));
    }
    int rows = idem.inTransaction(tx -> tx.dsl().fetchCount(DSL.table("notes"), DSL.field("id").eq(987_654)));
    idem.useTransaction(tx -> tx.dsl().execute("DELETE FROM notes WHERE id = ?", 987_654)); // the others count notes
    assertThat(rows).as("the first transaction's row").isEqualTo(1);
  }

  /**
   * The migrations name the schema unquoted: a name PostgreSQL would fold or must quote is refused
   * with a reason before anything is created, never a Flyway syntax error half-way through.
   */
  @Test
  void aSchemaNameTheMigrationsCannotUseIsRefusedBeforeAnythingIsCreated() {
    assertThatThrownBy(() -> Idem.builder(ds).schema("Billing").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'Billing'").hasMessageContaining("lower");
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "order"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'order'").hasMessageContaining("reserved word");
    assertThat(db.count(maria() ? "SELECT count(*) FROM information_schema.schemata WHERE schema_name IN ('Billing', 'billing', 'order')"
        : "SELECT count(*) FROM pg_namespace WHERE nspname IN ('Billing', 'billing', 'order')")).isZero();
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "left")) // a function-name keyword
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'left'");
    // an unreserved keyword, or a column-name one, needs no quotes as a schema name, and works
    // (on MariaDB a database of the server's, dropped again here)
    for (String keyword : List.of("action", "position")) {
      try {
        Idem works = Idem.builder(ds).schema(keyword).build();
        IdemFlyway.migrate(ds, keyword);
        assertThat(works.leases().acquire("r1", "w1", java.time.Duration.ofSeconds(5))).isPresent();
        assertThat(db.count("SELECT count(*) FROM " + keyword + ".idem_leases")).isEqualTo(1);
      } finally {
        if (maria()) {
          db.execute("DROP DATABASE IF EXISTS " + keyword);
        }
      }
    }
  }

  @Test
  void anExceptionRollsBackAndKeepsTheCallersType() {
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      tx.dsl().execute("INSERT INTO notes VALUES (1)");
      throw new IOException("disk on fire");
    })).isInstanceOf(IOException.class).hasMessage("disk on fire");
    assertThat(notes()).isZero();
  }

  /**
   * PostgreSQL aborts the transaction at the failed statement, and a commit would roll it all back
   * silently: the caller gets an error instead. MariaDB rolls back the failed statement alone and
   * the transaction goes on: what the callback wrote besides commits.
   */
  @Test
  void aCallbackThatSwallowsAnSqlErrorGetsAnErrorNotASilentRollback() {
    if (maria()) {
      idem.useTransaction(tx -> {
        tx.dsl().execute("INSERT INTO notes VALUES (4)");
        try {
          tx.dsl().execute("INSERT INTO notes VALUES (4)"); // a duplicate: MariaDB undoes this statement only
        } catch (org.jooq.exception.DataAccessException ignored) {
          // caught and not rethrown
        }
      });
      assertThat(notes()).isEqualTo(1);
      idem.useTransaction(tx -> tx.dsl().execute("DELETE FROM notes"));
      return;
    }
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      tx.dsl().execute("INSERT INTO notes VALUES (4)");
      try {
        tx.dsl().execute("INSERT INTO notes VALUES (4)"); // a duplicate: PostgreSQL aborts the transaction
      } catch (org.jooq.exception.DataAccessException ignored) {
        // caught and not rethrown
      }
    })).isInstanceOf(org.jooq.exception.DataAccessException.class).hasMessageContaining("aborted");
    assertThat(notes()).isZero();
  }

  @Test
  void anSQLExceptionFromTheCallbackIsRethrownAsItWas() {
    SQLException thrown = new SQLException("the caller's own", "XX001");
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      tx.dsl().execute("INSERT INTO notes VALUES (3)");
      throw thrown;
    })).isSameAs(thrown);
    assertThat(notes()).isZero();
  }

  @Test
  void theCallbacksExceptionSurvivesAConnectionThatDiedUnderIt() {
    IllegalStateException thrown = new IllegalStateException("the caller's own");
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      tx.dsl().execute("INSERT INTO notes VALUES (4)");
      int session = LockWaits.pid(tx.connection());
      try (var killer = ds.getConnection(); var st = killer.createStatement()) {
        st.execute(maria() ? "KILL CONNECTION " + session : "SELECT pg_terminate_backend(" + session + ")");
      }
      throw thrown;
    })).isSameAs(thrown);
    // the rollback on the dead connection failed, and says so
    assertThat(thrown.getSuppressed()).isNotEmpty();
    assertThat(notes()).isZero();
  }

  @Test
  void aNestedCallJoinsTheOpenTransaction() {
    assertThatThrownBy(() -> idem.useTransaction(outer -> {
      idem.useTransaction(inner -> {
        assertThat(inner.connection()).isSameAs(outer.connection());
        inner.dsl().execute("INSERT INTO notes VALUES (2)");
      });
      throw new IllegalStateException("outer fails after inner");
    })).isInstanceOf(IllegalStateException.class);
    assertThat(notes()).isZero();

    // As documented (and as in jdbi): a nested call sets no savepoint, so a caught nested
    // exception leaves what it wrote to commit with the outer transaction.
    idem.useTransaction(outer -> {
      try {
        idem.useTransaction(inner -> {
          inner.dsl().execute("INSERT INTO notes VALUES (5)");
          throw new IOException("inner step failed");
        });
      } catch (IOException caught) {
        // the outer work goes on
      }
    });
    assertThat(notes()).isEqualTo(1);
    idem.useTransaction(tx -> tx.dsl().execute("DELETE FROM notes"));
  }

  @Test
  void aSerializationFailureReRunsTheCallbackABoundedNumberOfTimes() {
    Idem twice = Idem.builder(ds).schema(idem.schema()).retries(new RetryBudget(3, Duration.ofMillis(1), Duration.ofMillis(5))).build();
    AtomicInteger runs = new AtomicInteger();
    assertThatThrownBy(() -> twice.useTransaction(tx -> {
      runs.incrementAndGet();
      tx.dsl().execute(maria() ? "BEGIN NOT ATOMIC SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'conflict'; END"
          : "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$");
    })).hasRootCauseInstanceOf(maria() ? java.sql.SQLException.class : org.postgresql.util.PSQLException.class)
        .satisfies(e -> assertThat(dev.idem.jdbc.internal.SqlStates.of(e)).isEqualTo("40001"));
    assertThat(runs).hasValue(3);
  }

  @Test
  void badConfigurationIsRefusedWithAReason() {
    assertThatThrownBy(() -> Idem.builder(ds).schema("idem; DROP TABLE x").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("schema");
    assertThatThrownBy(() -> Idem.builder(null)).hasMessageContaining("dataSource");
    assertThatThrownBy(() -> Idem.builder(ds).answersFromMemory(Duration.ofSeconds(-1)).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("answersFromMemory must be within 0 (never) and PT10M, was PT-1S");
    assertThatThrownBy(() -> Idem.builder(ds).answersFromMemory(Duration.ofMinutes(11)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("was PT11M");
    assertThatThrownBy(() -> Idem.builder(ds).answersFromMemory(null).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("answersFromMemory");
  }

  /**
   * A connection wrapper that does not support JDBC's unwrap (a tracing library's, or one from
   * before JDBC 4) cannot be asked whether PostgreSQL aborted the transaction; idem then commits
   * as it would without the question, instead of failing every transaction.
   */
  @Test
  void aConnectionThatCannotBeUnwrappedStillCommits() {
    DataSource opaque = (DataSource) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
        new Class<?>[] {DataSource.class}, (p, m, args) -> {
          Object r = Proxies.invoke(m, ds, args);
          if (!(r instanceof java.sql.Connection real)) {
            return r;
          }
          return java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
              new Class<?>[] {java.sql.Connection.class}, (cp, cm, cargs) -> {
                if (cm.getName().equals("isWrapperFor") || cm.getName().equals("unwrap")) {
                  throw new java.sql.SQLFeatureNotSupportedException(cm.getName());
                }
                return Proxies.invoke(cm, real, cargs);
              });
        });
    Idem.builder(opaque).schema(idem.schema()).build()
        .useTransaction(tx -> tx.dsl().execute("INSERT INTO notes VALUES (6)"));
    assertThat(notes()).isEqualTo(1);
    idem.useTransaction(tx -> tx.dsl().execute("DELETE FROM notes"));
  }

  /**
   * IdemFlyway runs the migrations Idem's constants name: a user's own Flyway configured with them
   * (location, history table, default schema) finds every migration applied, in that table.
   */
  @Test
  void idemFlywayRunsTheMigrationsIdemJdbcShips() {
    // the default schema, beside this class's idem_custom: each schema keeps its own history (on
    // MariaDB the default is the DataSource's own database, which Flyway uses when named no schema)
    IdemFlyway.migrate(ds);
    var configured = org.flywaydb.core.Flyway.configure().dataSource(ds).table(Idem.HISTORY_TABLE).locations(Idem.MIGRATIONS);
    org.flywaydb.core.Flyway yours = (maria() ? configured : configured.schemas(Idem.DEFAULT_SCHEMA)).load();
    assertThat(yours.info().pending()).isEmpty();
    assertThat(yours.info().applied()).isNotEmpty();
    assertThat(yours.validateWithResult().validationSuccessful).isTrue();
    assertThat(db.count("SELECT count(*) FROM " + (maria() ? "" : Idem.DEFAULT_SCHEMA + ".") + Idem.HISTORY_TABLE
        + " WHERE success AND version IS NOT NULL")).isPositive();
  }

}
