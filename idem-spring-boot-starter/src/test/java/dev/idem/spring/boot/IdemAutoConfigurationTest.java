package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.tx.TransactionBinding;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.spring.IdemExceptionTranslator;
import dev.idem.spring.RelayLifecycle;
import dev.idem.spring.SpringTransactionBinding;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TimedKeys;
import java.time.Duration;
import java.time.LocalDate;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.ThrowingConsumer;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.BadSqlGrammarException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.stereotype.Repository;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The starter in a real Spring context on a real database (PostgreSQL, or MariaDB when the run is
 * on it): what it makes, what it backs off from, and Spring's transaction as idem's, checked by
 * reading the rows. The class's database is not
 * migrated beforehand ({@code migrate = false}): the contexts run idem's migrations, as an
 * application's does. What a context does to a database no context has touched needs a database
 * of its own per test: {@link #onAnEmptyDatabase}.
 */
@IdemTest(migrate = false, sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
class IdemAutoConfigurationTest {
  final TestDatabase db;

  IdemAutoConfigurationTest(TestDatabase db) {
    this.db = db;
  }

  ApplicationContextRunner runner() {
    return runner(db);
  }

  /** An application on {@code database} with every auto-configuration; the starter's tests share it. */
  static ApplicationContextRunner runner(TestDatabase database) {
    return new ApplicationContextRunner()
        .withUserConfiguration(Boot.class)
        .withPropertyValues("spring.datasource.url=" + database.jdbcUrl(), "spring.datasource.hikari.maximum-pool-size=6",
            "spring.flyway.enabled=false"); // this application has no Flyway migrations of its own
  }

  /**
   * Runs {@code test} on a new, empty database of its own, dropped after it: for the tests of what a
   * context does to a database no context has touched (idem's migrations beside the application's,
   * the start-up checks without idem-flyway or Flyway), which the class's database, migrated by the
   * first context, cannot show. The starter's one way to get such a database.
   */
  static void onAnEmptyDatabase(String hint, ThrowingConsumer<TestDatabase> test) throws Throwable {
    try (TestDatabase fresh = TestDatabase.newDatabase(hint)) {
      test.accept(fresh);
    }
  }

  /** Every auto-configuration on the class path, as in an application (and the same on Boot 3 and 4). */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class Boot {}

  static IdempotencyKey key(String value) {
    return IdempotencyKey.of("starter", value);
  }

  long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  long keys(String value) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = 'starter' AND idem_keys.key = ?", value);
  }

  @Test
  void makesIdemOnTheDataSourceWithSpringsBindingAndRunsItsMigrations() {
    runner().withPropertyValues("idem.executors.payments.window=1h", "idem.inboxes.orders.window=2d").withBean(Holder.class).run(ctx -> {
      assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class).hasSingleBean(Outbox.class)
          .hasSingleBean(IdemExceptionTranslator.class).doesNotHaveBean(RelayLifecycle.class);
      assertThat(ctx.getBean(TransactionBinding.class)).isInstanceOf(SpringTransactionBinding.class);
      assertThat(db.count("SELECT count(*) FROM idem_schema_history WHERE success")).isPositive();
      assertThat(ctx.getBean("idem.executors.payments", IdempotentExecutor.class).window().length()).isEqualTo(Duration.ofHours(1));
      assertThat(ctx.getBean("idem.inboxes.orders", Inbox.class)).isNotNull();
      assertThat(ctx.getBean(Holder.class).payments.window().length()).isEqualTo(Duration.ofHours(1));
    });
  }

  /**
   * A repeat of a key the executor applied lately is answered from memory, even after its row was
   * deleted by hand (as a test emptying idem's tables between cases does); with {@code
   * idem.answers-from-memory=0s} every repeat goes to the database, which has forgotten the key, so
   * it runs again. Out of range, the application does not start.
   */
  @Test
  void answersFromMemoryIsAPropertyAndZeroTurnsTheMemoryOff() {
    for (String kept : new String[] {"30s", "0s"}) {
      runner().withPropertyValues("idem.executors.payments.window=1h", "idem.answers-from-memory=" + kept).run(ctx -> {
        IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
        String order = "memory-" + kept + "-" + UUID.randomUUID();
        Execution<String> first = pay(payments, order);
        assertThat(first.applied()).isTrue();
        db.execute("DELETE FROM idem_keys WHERE scope = 'starter' AND idem_keys.key = '" + order + "'");
        Execution<String> again = pay(payments, order);
        if (kept.equals("30s")) {
          assertThat(again.replayed()).as("answered from memory").isTrue();
          assertThat(payments(order)).isEqualTo(1);
          assertThat(keys(order)).isZero();
        } else {
          assertThat(again.applied()).as("the database forgot the key").isTrue();
          assertThat(payments(order)).isEqualTo(2);
          assertThat(keys(order)).isEqualTo(1);
        }
      });
    }
    runner().withPropertyValues("idem.answers-from-memory=11m")
        .run(ctx -> assertThat(ctx).hasFailed().getFailure().hasStackTraceContaining("answersFromMemory must be within 0"));
  }

  static Execution<String> pay(IdempotentExecutor payments, String order) {
    return payments.execute(key(order), Fingerprint.of(order), Codec.utf8(), t -> {
      t.dsl().execute("INSERT INTO payments VALUES (?, 1)", order);
      return "paid " + order;
    });
  }

  /** Takes the executor of {@code idem.executors.payments} by its qualifier. */
  static class Holder {
    final IdempotentExecutor payments;

    Holder(@Qualifier("payments") IdempotentExecutor payments) {
      this.payments = payments;
    }
  }

  /**
   * The application's migrations, one folder per database ({@code {vendor}}, which Boot's Flyway
   * fills in), beside idem's. On MariaDB both are in the one database, each Flyway with its own
   * history table.
   */
  @Test
  void idemsMigrationsRunBesideTheApplicationsOwnFlywayEachWithItsHistory() throws Throwable {
    onAnEmptyDatabase("starter-flyway", fresh -> runner(fresh).withPropertyValues("spring.flyway.enabled=true",
        "spring.flyway.locations=classpath:db/app/{vendor}").run(ctx -> {
          assertThat(ctx).hasNotFailed();
          String appHistory = Vendors.mariadb(fresh) ? "flyway_schema_history" : "public.flyway_schema_history";
          assertThat(fresh.count("SELECT count(*) FROM " + appHistory + " WHERE success AND script = 'V1__orders.sql'")).isEqualTo(1);
          assertThat(fresh.count("SELECT count(*) FROM " + appHistory + " WHERE script LIKE '%idem%'")).isZero();
          assertThat(fresh.count("SELECT count(*) FROM idem_schema_history WHERE success")).isPositive();
          assertThat(fresh.count("SELECT count(*) FROM idem_schema_history WHERE script = 'V1__orders.sql'")).isZero();
          assertThat(fresh.count("SELECT count(*) FROM orders")).isZero(); // the application's table is there
        }));
  }

  /**
   * {@code idem.schema} puts idem's tables elsewhere, migrated there and used there: a schema on
   * PostgreSQL; on MariaDB another database on the same server (the default being the DataSource's
   * own, which is left without them).
   */
  @Test
  void idemSchemaNamesWhereIdemsTablesGo() throws Throwable {
    onAnEmptyDatabase("starter-schema", fresh -> {
      String schema = Vendors.mariadb(fresh) ? fresh.name() + "_idem" : "shop_idem";
      try {
        runner(fresh).withPropertyValues("idem.schema=" + schema, "idem.executors.payments.window=1h").run(ctx -> {
          assertThat(ctx).hasNotFailed();
          IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
          assertThat(payments.execute(key("elsewhere"), Fingerprint.of("e"), Codec.utf8(), t -> "x").applied()).isTrue();
        });
        assertThat(fresh.count("SELECT count(*) FROM " + schema + ".idem_keys WHERE scope = 'starter'")).isEqualTo(1);
        assertThat(fresh.count("SELECT count(*) FROM " + schema + ".idem_schema_history WHERE success")).isPositive();
        assertThat(Vendors.idemTables(fresh)).as("nothing where idem's tables go by default").isZero();
      } finally {
        if (Vendors.mariadb(fresh)) {
          fresh.execute("DROP DATABASE IF EXISTS " + schema); // a database of its own, not dropped with the test's
        }
      }
    });
  }

  /**
   * MariaDB: with {@code idem.schema} unset idem's tables go in the DataSource's own database, so a
   * URL that names none is refused at start-up, naming the property, whether idem's migrations run
   * or only the check that its tables exist.
   */
  @Test
  void onMariaDbAUrlNamingNoDatabaseIsRefusedAtStartUp() {
    Assumptions.assumeTrue(Vendors.mariadb(db), "a PostgreSQL URL always names a database");
    String noDatabase = db.jdbcUrl().replaceFirst("^(jdbc:mariadb://[^/?]+)/[^?]*", "$1/");
    assertThat(noDatabase).doesNotContain(db.name());
    for (ApplicationContextRunner runner : List.of(runner(), runner().withClassLoader(new FilteredClassLoader(IdemFlyway.class)))) {
      runner.withPropertyValues("spring.datasource.url=" + noDatabase).run(ctx -> {
        assertThat(ctx).hasFailed();
        assertThat(ctx.getStartupFailure()).hasStackTraceContaining("idem.schema is not set")
            .hasStackTraceContaining("Name the database in spring.datasource.url, or set idem.schema");
      });
    }
  }

  @Test
  void withoutIdemFlywayStartUpChecksTheTablesAndSaysHowToGetThem() throws Throwable {
    onAnEmptyDatabase("starter-bare", fresh -> {
      runner(fresh).withClassLoader(new FilteredClassLoader(IdemFlyway.class))
          .run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining("add the dependency dev.idem:idem-flyway");
          });
      assertThat(Vendors.idemTables(fresh)).isZero();
      runner(fresh).withClassLoader(new FilteredClassLoader(IdemFlyway.class)).withPropertyValues("idem.migrate.enabled=false")
          .run(ctx -> assertThat(ctx).hasNotFailed().hasSingleBean(Idem.class));
    });
  }

  @Test
  void backsOffFromTheApplicationsOwnBeansAndFromDisabledFeatures() {
    Idem mine = Idem.builder(db.dataSource(2)).build();
    runner().withBean("mine", Idem.class, () -> mine)
        .withPropertyValues("idem.migrate.enabled=false", "idem.expiry.enabled=false")
        .run(ctx -> {
          assertThat(ctx).hasNotFailed().doesNotHaveBean(IdemMigrations.class).doesNotHaveBean(ExpirySchedule.class);
          assertThat(ctx.getBean(Idem.class)).isSameAs(mine);
        });
  }

  @Test
  void aWindowShorterThanTheRepeatsItMustCoverFailsStartUpNamingTheProperty() {
    runner().withPropertyValues("idem.executors.webhooks.window=1h", "idem.executors.webhooks.covers=webhook-retries")
        .run(ctx -> assertThat(ctx).hasFailed().getFailure().rootCause().hasMessageContaining("WEBHOOK_RETRIES"))
        .run(ctx -> assertThat(ctx).hasFailed().getFailure().hasStackTraceContaining("idem.executors.webhooks: "));
    runner().withPropertyValues("idem.inboxes.orders.lease=10s")
        .run(ctx -> assertThat(ctx).hasFailed().getFailure().rootCause().hasMessageContaining("idem.inboxes.orders.lease"));
  }

  @Test
  void insideSpringsTransactionTheKeyCommitsAndRollsBackWithThePayment() {
    runner().withPropertyValues("idem.executors.payments.window=1h").withUserConfiguration(Events.class).run(ctx -> {
      TransactionTemplate tx = ctx.getBean(TransactionTemplate.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      List<IdemEvent> events = ctx.getBean(Events.class).seen;

      // The lost payment of issue 15: the outer transaction rolls back after idem's call.
      tx.executeWithoutResult(status -> {
        Execution<String> e = payments.execute(key("rb"), Fingerprint.of("o-rb"), Codec.utf8(), t -> {
          // the same connection as JdbcTemplate's in this transaction
          String session = Vendors.mariadb(db) ? "SELECT CONNECTION_ID()" : "SELECT pg_backend_pid()";
          assertThat(((Number) t.dsl().fetchValue(session)).longValue()).isEqualTo(jdbc.queryForObject(session, Long.class));
          jdbc.update("INSERT INTO payments VALUES ('o-rb', 4000)");
          return "pay_rb";
        });
        assertThat(e.applied()).isTrue();
        status.setRollbackOnly();
      });
      assertThat(payments("o-rb")).isZero();
      assertThat(keys("rb")).isZero();
      assertThat(events).isEmpty(); // Applied is delivered after commit, never for a rollback

      String first = tx.execute(status -> payments.execute(key("rb"), Fingerprint.of("o-rb"), Codec.utf8(), t -> {
        jdbc.update("INSERT INTO payments VALUES ('o-rb', 4000)");
        return "pay_rb";
      }).value());
      Execution<String> again = tx.execute(status -> payments.execute(key("rb"), Fingerprint.of("o-rb"), Codec.utf8(), t -> {
        jdbc.update("INSERT INTO payments VALUES ('o-rb', 4000)");
        return "other";
      }));
      assertThat(first).isEqualTo("pay_rb");
      assertThat(again.replayed()).isTrue();
      assertThat(again.value()).isEqualTo("pay_rb");
      assertThat(payments("o-rb")).isEqualTo(1);
      assertThat(keys("rb")).isEqualTo(1);
      assertThat(events).hasSize(2).first().isInstanceOf(IdemEvent.Applied.class);
      assertThat(events.get(1)).isInstanceOf(IdemEvent.Replayed.class);
    });
  }

  @Test
  void aTransactionAwareDataSourceProxyIsUnwrappedAndTheKeyStillJoinsSpringsTransaction() {
    try (HikariDataSource pool = db.dataSource(4)) {
      runner().withBean(DataSource.class, () -> new TransactionAwareDataSourceProxy(pool))
          .withPropertyValues("idem.executors.payments.window=1h").run(ctx -> {
            TransactionTemplate tx = ctx.getBean(TransactionTemplate.class);
            JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
            IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
            for (boolean commit : new boolean[] {false, true}) {
              tx.executeWithoutResult(status -> {
                payments.execute(key("proxy"), Fingerprint.of("o-proxy"), Codec.utf8(), t -> {
                  jdbc.update("INSERT INTO payments VALUES ('o-proxy', 1)");
                  return "p";
                });
                if (!commit) {
                  status.setRollbackOnly();
                }
              });
              assertThat(payments("o-proxy")).isEqualTo(commit ? 1 : 0);
              assertThat(keys("proxy")).isEqualTo(commit ? 1 : 0);
            }
          });
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class Events implements IdemListener {
    final List<IdemEvent> seen = new CopyOnWriteArrayList<>();

    @Override
    public void onApplied(IdemEvent.Applied event) {
      seen.add(event);
    }

    @Override
    public void onReplayed(IdemEvent.Replayed event) {
      seen.add(event);
    }
  }

  @Test
  void aReadOnlyTransactionIsRefusedBeforeAnyWrite() {
    runner().withPropertyValues("idem.executors.payments.window=1h").run(ctx -> {
      TransactionTemplate readOnly = new TransactionTemplate(ctx.getBean(TransactionTemplate.class).getTransactionManager());
      readOnly.setReadOnly(true);
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      Outbox outbox = ctx.getBean(Outbox.class);
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> readOnly.executeWithoutResult(s ->
              payments.execute(key("ro"), Fingerprint.of("o-ro"), Codec.utf8(), t -> "x")))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("read-only");
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> readOnly.executeWithoutResult(s ->
              outbox.enqueue(NewMessage.of("orders", new byte[] {1}))))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("read-only");
      assertThat(keys("ro")).isZero();
    });
  }

  @Test
  void idemsDataAccessErrorsFromARepositoryAreSpringsDataAccessExceptions() {
    runner().withPropertyValues("idem.schema=no_such_schema", "idem.migrate.enabled=false",
            "idem.executors.payments.window=1h")
        .withUserConfiguration(PaymentsRepository.class)
        .run(ctx -> org.assertj.core.api.Assertions.assertThatThrownBy(() -> ctx.getBean(PaymentsRepository.class).pay("tr"))
            .isInstanceOf(BadSqlGrammarException.class));
  }

  @Repository
  static class PaymentsRepository {
    final IdempotentExecutor payments;

    PaymentsRepository(@Qualifier("payments") IdempotentExecutor payments) {
      this.payments = payments;
    }

    public String pay(String k) {
      return payments.execute(key(k), Fingerprint.of(k), Codec.utf8(), t -> "paid").value();
    }
  }

  @Test
  void theRelayPublishesAndStopsAndStartsWithTheContext() {
    List<UUID> published = new CopyOnWriteArrayList<>();
    runner().withBean(Publisher.class, () -> m -> published.add(m.id()))
        .withPropertyValues("idem.relay.poll-interval=20ms", "idem.relay.shutdown-timeout=2s")
        .run(ctx -> {
          Outbox outbox = ctx.getBean(Outbox.class);
          TransactionTemplate tx = ctx.getBean(TransactionTemplate.class);
          RelayLifecycle relay = ctx.getBean(RelayLifecycle.class);
          assertThat(relay.isRunning()).isTrue();
          UUID first = tx.execute(s -> outbox.enqueue(NewMessage.of("orders", new byte[] {1})));
          Poll.until("the first message marked sent", () -> db.count("SELECT count(*) FROM idem_outbox WHERE id = ? AND status = 'S'", first) == 1);

          ctx.stop();
          assertThat(relay.isRunning()).isFalse();
          UUID second = tx.execute(s -> outbox.enqueue(NewMessage.of("orders", new byte[] {2})));
          // Not an ordering of threads: a stopped relay has no thread to publish with, and there is
          // no event to wait for when nothing happens. Five poll intervals (20 ms) in which a relay
          // still running would have published it.
          Thread.sleep(100);
          assertThat(published).doesNotContain(second);
          assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE id = ? AND status = 'P'", second)).isEqualTo(1);

          ctx.start();
          assertThat(relay.isRunning()).isTrue();
          // marked sent when the batch commits, just after the publish
          Poll.until("both messages marked sent", () -> db.count("SELECT count(*) FROM idem_outbox WHERE id IN (?, ?) AND status = 'S'", first, second) == 2);
          assertThat(published).containsOnlyOnce(first, second);
        });
  }

  @Test
  void theDebeziumOutboxLayoutIsAProperty() {
    Assumptions.assumeFalse(Vendors.mariadb(db), "the Debezium outbox layout is PostgreSQL only (its router reads PostgreSQL's"
        + " write-ahead log; MariaDB's migrations have no idem_outbox_events)");
    runner().withPropertyValues("idem.outbox-layout=debezium").run(ctx -> {
      Outbox outbox = ctx.getBean(Outbox.class);
      TransactionTemplate tx = ctx.getBean(TransactionTemplate.class);
      long before = db.count("SELECT count(*) FROM idem_outbox");
      // Inside the enqueuing transaction: the row went through the router's table (inserted and
      // deleted there, as the write-ahead log carries it to Debezium), never through idem_outbox.
      List<Long> counts = tx.execute(s -> {
        outbox.enqueue(NewMessage.of("orders", new byte[] {1}));
        JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
        return jdbc.queryForList("SELECT n_tup_ins FROM pg_stat_xact_user_tables WHERE schemaname = 'idem'"
            + " AND relname IN ('idem_outbox_events', 'idem_outbox') ORDER BY relname DESC", Long.class);
      });
      assertThat(counts).containsExactly(1L, 0L);
      assertThat(db.count("SELECT count(*) FROM idem_outbox_events")).isZero();
      assertThat(db.count("SELECT count(*) FROM idem_outbox")).isEqualTo(before);
    });
  }

  @Test
  void theExpiryScheduleDeletesKeysPastTheirWindow() {
    runner().withPropertyValues("idem.executors.short.window=1ms", "idem.expiry.interval=100ms").run(ctx -> {
      IdempotentExecutor shortLived = ctx.getBean("idem.executors.short", IdempotentExecutor.class);
      shortLived.execute(key("ex"), Fingerprint.of("ex"), Codec.utf8(), t -> "x");
      Poll.until("the expired key deleted", () -> keys("ex") == 0);
    });
  }

  @Test
  void thePartitionedLayoutIsChosenByAPropertyAndTheExpiryScheduleMaintainsItsPartitions() throws Throwable {
    if (Vendors.mariadb(db)) {
      // PostgreSQL's declarative partitioning: on MariaDB start-up refuses the property, before any migration.
      onAnEmptyDatabase("starter-partitioned", fresh -> {
        runner(fresh).withPropertyValues("idem.migrate.layout=partitioned").run(ctx -> {
          assertThat(ctx).hasFailed();
          assertThat(ctx.getStartupFailure()).hasStackTraceContaining("idem.migrate.layout=partitioned is PostgreSQL's only")
              .hasStackTraceContaining("on MariaDB");
        });
        assertThat(Vendors.idemTables(fresh)).isZero();
      });
      return;
    }
    onAnEmptyDatabase("starter-partitioned", fresh ->
        runner(fresh).withPropertyValues("idem.migrate.layout=partitioned", "idem.expiry.interval=100ms").run(ctx -> {
          assertThat(fresh.count("SELECT count(*) FROM pg_partitioned_table WHERE partrelid IN"
              + " ('idem_keys'::regclass, 'idem_inbox'::regclass)")).isEqualTo(2);
          // a day the migration did not create, older than the partitions it creates: the schedule drops it
          fresh.execute(TimedKeys.keyPartitionOf(LocalDate.of(2000, 1, 1)));
          Poll.until("the old empty partition dropped",
              () -> fresh.count("SELECT count(*) FROM pg_class WHERE relname = 'idem_keys_p20000101'") == 0);
        }));
  }
}
