package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Outside any Spring transaction, idem runs the effect in a transaction of its own and lends it to
 * Spring: JdbcTemplate and a nested TransactionTemplate in the effect write on idem's connection,
 * so an effect that writes and then throws leaves nothing, and its redelivery leaves exactly one
 * row with its key. Read from the database.
 */
@IdemTest(sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
class IdemOwnTransactionTest {
  final TestDatabase db;

  IdemOwnTransactionTest(TestDatabase db) {
    this.db = db;
  }

  @BeforeAll
  static void tables(TestDatabase db) {
    // PostgreSQL: a second audit for an order fails at COMMIT, not at the INSERT: a commit that
    // fails. MariaDB checks every constraint at once (no deferred ones): a plain table.
    db.execute(Vendors.sql(db,
        "CREATE TABLE audits (order_id text NOT NULL, CONSTRAINT one_audit UNIQUE (order_id) DEFERRABLE INITIALLY DEFERRED)",
        "CREATE TABLE audits (order_id text NOT NULL)"));
  }

  ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db)
        .withPropertyValues("idem.executors.payments.window=1h", "idem.inboxes.orders.window=1h");
  }

  long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  long keys(String scope, String value) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?", scope, value);
  }

  long inboxRows(String id) {
    return db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'orders' AND message_id = ?", id);
  }

  /** Nothing of idem's lending is left on the thread after a call, whatever its outcome. */
  static void nothingLeftBound() {
    assertThat(TransactionSynchronizationManager.getResourceMap()).isEmpty();
    assertThat(TransactionSynchronizationManager.isSynchronizationActive()).isFalse();
    assertThat(TransactionSynchronizationManager.isActualTransactionActive()).isFalse();
  }

  static String pay(ApplicationContext ctx, IdempotentExecutor payments, String order, boolean fail) {
    JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
    return payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(), tx -> {
      assertThat(TransactionSynchronizationManager.isActualTransactionActive()).isTrue();
      jdbc.update("INSERT INTO payments VALUES (?, 1)", order);
      if (fail) {
        throw new IllegalStateException("the provider said no");
      }
      return "paid " + order;
    }).value();
  }

  @Test
  void anExecutorEffectThatWritesWithJdbcTemplateAndThrowsLeavesNothingAndItsRedeliveryOneRow() {
    runner().run(ctx -> {
      assertThat(ctx).hasNotFailed();
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      String order = "own-" + UUID.randomUUID();
      assertThat(TransactionSynchronizationManager.isActualTransactionActive()).isFalse();
      assertThatThrownBy(() -> pay(ctx, payments, order, true)).hasMessage("the provider said no");
      nothingLeftBound();
      assertThat(payments(order)).isZero();
      assertThat(keys("own", order)).isZero();

      assertThat(pay(ctx, payments, order, false)).isEqualTo("paid " + order);
      assertThat(payments(order)).isEqualTo(1);
      assertThat(keys("own", order)).isEqualTo(1);
      assertThat(pay(ctx, payments, order, false)).as("a repeat: answered, not run").isEqualTo("paid " + order);
      assertThat(payments(order)).isEqualTo(1);
      assertThat(keys("own", order)).isEqualTo(1);
      nothingLeftBound();
    });
  }

  @Test
  void anInboxEffectThatWritesWithJdbcTemplateAndThrowsLeavesNothingAndItsRedeliveryOneRow() {
    runner().run(ctx -> {
      Inbox orders = ctx.getBean("idem.inboxes.orders", Inbox.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      String id = "own-msg-" + UUID.randomUUID();
      assertThatThrownBy(() -> orders.receive(id, tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", id);
        throw new IllegalStateException("handler failed");
      })).hasMessage("handler failed");
      nothingLeftBound();
      assertThat(payments(id)).isZero();
      assertThat(inboxRows(id)).isZero();

      assertThat(orders.receive(id, tx -> jdbc.update("INSERT INTO payments VALUES (?, 1)", id)).applied()).isTrue();
      assertThat(orders.receive(id, tx -> jdbc.update("INSERT INTO payments VALUES (?, 1)", id)).replayed()).isTrue();
      assertThat(payments(id)).isEqualTo(1);
      assertThat(inboxRows(id)).isEqualTo(1);
      nothingLeftBound();
    });
  }

  @Test
  void aNestedTransactionTemplateTakesPartAndItsRollbackOnlyRollsIdemBack() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      TransactionTemplate nested = ctx.getBean(TransactionTemplate.class);
      String order = "nested-" + UUID.randomUUID();
      String value = payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(), tx -> {
        nested.executeWithoutResult(status -> {
          assertThat(status.isNewTransaction()).as("takes part in idem's").isFalse();
          jdbc.update("INSERT INTO payments VALUES (?, 1)", order);
        });
        return "paid";
      }).value();
      assertThat(value).isEqualTo("paid");
      assertThat(payments(order)).isEqualTo(1);
      assertThat(keys("own", order)).isEqualTo(1);

      String vetoed = "vetoed-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", vetoed), Fingerprint.of(vetoed), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", vetoed);
        try {
          nested.executeWithoutResult(status -> {
            throw new IllegalStateException("inner failure");
          });
        } catch (IllegalStateException swallowed) {
          // the participant marked the whole transaction rollback-only
        }
        return "paid";
      })).isInstanceOf(UnexpectedRollbackException.class).hasMessageContaining("rollback-only");
      nothingLeftBound();
      assertThat(payments(vetoed)).isZero();
      assertThat(keys("own", vetoed)).isZero();
    });
  }

  /** A synchronization that writes down what Spring told it, in order. */
  record Recorder(String name, List<String> seen, boolean failBeforeCommit) implements TransactionSynchronization {
    Recorder(String name, List<String> seen) {
      this(name, seen, false);
    }

    @Override
    public void beforeCommit(boolean readOnly) {
      seen.add(name + ".beforeCommit");
      if (failBeforeCommit) {
        throw new IllegalStateException("beforeCommit refused");
      }
    }

    @Override
    public void beforeCompletion() {
      seen.add(name + ".beforeCompletion");
    }

    @Override
    public void afterCommit() {
      seen.add(name + ".afterCommit");
    }

    @Override
    public void afterCompletion(int status) {
      seen.add(name + ".afterCompletion(" + switch (status) {
        case STATUS_COMMITTED -> "committed";
        case STATUS_ROLLED_BACK -> "rolled back";
        default -> "unknown";
      } + ")");
    }
  }

  @Test
  void synchronizationsRunAroundIdemsCommitInSpringsOrderWithItsOutcome() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      List<String> seen = new ArrayList<>();
      String order = "sync-" + UUID.randomUUID();
      long[] visibleAfterCommit = {-1};
      payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", order);
        TransactionSynchronizationManager.registerSynchronization(new Recorder("a", seen));
        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
          @Override
          public void afterCommit() {
            visibleAfterCommit[0] = payments(order); // from another connection: committed by now
          }
        });
        return "paid";
      });
      assertThat(seen).containsExactly("a.beforeCommit", "a.beforeCompletion", "a.afterCommit", "a.afterCompletion(committed)");
      assertThat(visibleAfterCommit[0]).isEqualTo(1);
      assertThat(keys("own", order)).isEqualTo(1);
      nothingLeftBound();

      // The effect fails: told of the rollback, never of a commit.
      seen.clear();
      String failed = "sync-failed-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", failed), Fingerprint.of(failed), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", failed);
        TransactionSynchronizationManager.registerSynchronization(new Recorder("a", seen));
        throw new IllegalStateException("the provider said no");
      })).hasMessage("the provider said no");
      assertThat(seen).containsExactly("a.beforeCompletion", "a.afterCompletion(rolled back)");
      assertThat(payments(failed)).isZero();
      nothingLeftBound();

      // A beforeCommit refuses: every synchronization still hears beforeCompletion, as Spring does.
      seen.clear();
      String refused = "sync-refused-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", refused), Fingerprint.of(refused), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", refused);
        TransactionSynchronizationManager.registerSynchronization(new Recorder("a", seen, true));
        return "paid";
      })).hasMessage("beforeCommit refused");
      assertThat(seen).containsExactly("a.beforeCommit", "a.beforeCompletion", "a.afterCompletion(rolled back)");
      assertThat(payments(refused)).isZero();
      assertThat(keys("own", refused)).isZero();
      nothingLeftBound();
    });
  }

  @Test
  void aCommitThatFailsIsToldAsARollbackAndLeavesNothing() {
    Assumptions.assumeFalse(Vendors.mariadb(db), "a COMMIT refused for a reason the test causes needs a deferred constraint,"
        + " which MariaDB lacks (a commit killed mid-way is FaultyDataSource's: the kit's tests)");
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      List<String> seen = new ArrayList<>();
      String order = "commit-fails-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.none(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", order);
        jdbc.update("INSERT INTO audits VALUES (?), (?)", order, order); // checked at COMMIT
        TransactionSynchronizationManager.registerSynchronization(new Recorder("a", seen));
        return null;
      })).hasMessageContaining("could not commit").hasMessageContaining("one_audit");
      assertThat(seen).containsExactly("a.beforeCommit", "a.beforeCompletion", "a.afterCompletion(rolled back)");
      assertThat(payments(order)).isZero();
      assertThat(keys("own", order)).isZero();
      assertThat(db.count("SELECT count(*) FROM audits WHERE order_id = ?", order)).isZero();
      nothingLeftBound();
    });
  }

  @Test
  void requiresNewInsideIdemsTransactionCommitsApartAsAsked() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      TransactionTemplate requiresNew = new TransactionTemplate(ctx.getBean(org.springframework.transaction.PlatformTransactionManager.class));
      requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
      String order = "new-" + UUID.randomUUID();
      String audit = order + "-audit";
      payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", order);
        requiresNew.executeWithoutResult(status -> {
          assertThat(status.isNewTransaction()).isTrue();
          jdbc.update("INSERT INTO payments VALUES (?, 1)", audit);
        });
        // Back in idem's transaction: JdbcTemplate is on idem's connection again.
        jdbc.update("UPDATE payments SET amount = 2 WHERE order_id = ?", order);
        // Seen from another connection before idem's commit: the audit committed apart; the key
        // and the order's payment not yet, in the one transaction still open.
        assertThat(List.of(payments(audit), payments(order), keys("own", order))).containsExactly(1L, 0L, 0L);
        return "paid";
      });
      assertThat(List.of(payments(order), keys("own", order))).containsExactly(1L, 1L);
      if (!Vendors.mariadb(db)) {
        // PostgreSQL tells the transaction that wrote each row (MariaDB keeps no such trace).
        String keyTx = jdbc.queryForObject("SELECT xmin::text FROM idem_keys WHERE scope = 'own' AND idem_keys.key = ?", String.class, order);
        assertThat(jdbc.queryForObject("SELECT xmin::text FROM payments WHERE order_id = ?", String.class, order)).isEqualTo(keyTx);
        assertThat(jdbc.queryForObject("SELECT xmin::text FROM payments WHERE order_id = ?", String.class, audit)).isNotEqualTo(keyTx);
      }
      nothingLeftBound();

      String failed = "new-failed-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", failed), Fingerprint.of(failed), Codec.utf8(), tx -> {
        jdbc.update("INSERT INTO payments VALUES (?, 1)", failed);
        requiresNew.executeWithoutResult(status -> jdbc.update("INSERT INTO payments VALUES (?, 1)", failed + "-audit"));
        throw new IllegalStateException("the provider said no");
      })).hasMessage("the provider said no");
      assertThat(payments(failed)).isZero();
      assertThat(keys("own", failed)).isZero();
      assertThat(payments(failed + "-audit")).as("REQUIRES_NEW committed apart, as asked").isEqualTo(1);
      nothingLeftBound();
    });
  }

  @Test
  void aSerializationFailureRunsTheEffectAgainInAFreshLentTransaction() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      JdbcTemplate jdbc = ctx.getBean(JdbcTemplate.class);
      String order = "retry-" + UUID.randomUUID();
      List<String> seen = new ArrayList<>();
      List<Long> transactions = new ArrayList<>();
      List<Long> seenAtStart = new ArrayList<>();
      String value = payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(), tx -> {
        int run = transactions.size() + 1;
        // A fresh lending each run: nothing registered by the run before is left.
        assertThat(TransactionSynchronizationManager.getSynchronizations()).noneMatch(s -> s instanceof Recorder);
        TransactionSynchronizationManager.registerSynchronization(new Recorder("run" + run, seen));
        if (Vendors.mariadb(db)) {
          // MariaDB has no transaction id to read (InnoDB's information_schema.innodb_trx is a
          // cache refreshed every 0.1 s): a run tells its transaction is fresh by not seeing the
          // payment the run before wrote and rolled back.
          transactions.add((long) run);
          seenAtStart.add(jdbc.queryForObject("SELECT count(*) FROM payments WHERE order_id = ?", Long.class, order));
        } else {
          transactions.add(jdbc.queryForObject("SELECT txid_current()", Long.class));
        }
        jdbc.update("INSERT INTO payments VALUES (?, ?)", order, run);
        if (run == 1) {
          jdbc.execute(Vendors.serializationFailure(db, "could not serialize (test)"));
        }
        return "paid on run " + run;
      }).value();
      assertThat(value).isEqualTo("paid on run 2");
      assertThat(transactions).hasSize(2).doesNotHaveDuplicates();
      if (Vendors.mariadb(db)) {
        assertThat(seenAtStart).as("each run saw no payment of the run before").containsExactly(0L, 0L);
      }
      assertThat(seen).containsExactly("run1.beforeCompletion", "run1.afterCompletion(rolled back)",
          "run2.beforeCommit", "run2.beforeCompletion", "run2.afterCommit", "run2.afterCompletion(committed)");
      assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = ? AND amount = 2", order)).isEqualTo(1);
      assertThat(payments(order)).isEqualTo(1);
      assertThat(keys("own", order)).isEqualTo(1);
      nothingLeftBound();
    });
  }

  @Test
  void whenLendingFailsPartWayWhatSpringHadOnTheThreadIsLeftAsItWas() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      List<String> seen = new ArrayList<>();
      TransactionSynchronization first = new TransactionSynchronization() {
        @Override
        public void suspend() {
          seen.add("first.suspend");
        }

        @Override
        public void resume() {
          seen.add("first.resume");
        }
      };
      TransactionSynchronization refusing = new TransactionSynchronization() {
        @Override
        public void suspend() {
          throw new IllegalStateException("cannot suspend");
        }
      };
      String order = "aside-" + UUID.randomUUID();
      TransactionSynchronizationManager.initSynchronization(); // a non-transactional scope of Spring's
      try {
        TransactionSynchronizationManager.registerSynchronization(first);
        TransactionSynchronizationManager.registerSynchronization(refusing);
        assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("own", order), Fingerprint.of(order), Codec.utf8(),
            tx -> "paid")).hasMessage("cannot suspend");
        assertThat(seen).containsExactly("first.suspend", "first.resume");
        assertThat(TransactionSynchronizationManager.isSynchronizationActive()).isTrue();
        assertThat(TransactionSynchronizationManager.getSynchronizations()).containsExactly(first, refusing);
        assertThat(TransactionSynchronizationManager.getResourceMap()).isEmpty();
      } finally {
        TransactionSynchronizationManager.clearSynchronization();
      }
      assertThat(keys("own", order)).isZero();
      nothingLeftBound();
    });
  }
}
