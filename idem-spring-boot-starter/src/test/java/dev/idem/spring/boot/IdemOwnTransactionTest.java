package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Outside any Spring transaction, idem runs the effect in a transaction of its own and lends it to
 * Spring: JdbcTemplate and a nested TransactionTemplate in the effect write on idem's connection,
 * so an effect that writes and then throws leaves nothing, and its redelivery leaves exactly one
 * row with its key. Read from the database.
 */
class IdemOwnTransactionTest {
  static TestDatabase db;

  @BeforeAll
  static void start() {
    db = TestPostgres.newDatabase("starter-own");
    db.execute("CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)");
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  static ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db)
        .withPropertyValues("idem.executors.payments.window=1h", "idem.inboxes.orders.window=1h");
  }

  static long payments(String order) {
    return db.count("SELECT count(*) FROM payments WHERE order_id = ?", order);
  }

  static long keys(String scope, String value) {
    return db.count("SELECT count(*) FROM idem.idem_keys WHERE scope = ? AND key = ?", scope, value);
  }

  static long inboxRows(String id) {
    return db.count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = 'orders' AND message_id = ?", id);
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
}
