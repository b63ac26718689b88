package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.FilterType;
import org.springframework.dao.InvalidDataAccessApiUsageException;
import org.springframework.data.jpa.repository.JpaRepository;
import org.springframework.data.jpa.repository.config.EnableJpaRepositories;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * idem in a JPA application (Spring Data JPA, Hibernate, {@code JpaTransactionManager}) on the
 * run's database (PostgreSQL or MariaDB): an {@code @Idempotent} method that saves through a repository, outside any
 * {@code @Transactional}, commits the entity with its key; idem joins a JPA transaction; a JPA
 * transaction begun inside idem's own transaction, which it cannot join, is refused before
 * anything is written. Read from the database.
 */
// VARCHAR: MariaDB keys no TEXT column without a length. Hibernate tells the database apart itself.
@IdemTest(sql = "CREATE TABLE charge (id varchar(100) PRIMARY KEY, amount int NOT NULL)")
class IdemJpaTest {
  final TestDatabase db;

  IdemJpaTest(TestDatabase db) {
    this.db = db;
  }

  @Entity
  @Table(name = "charge")
  public static class Charge {
    @Id
    private String id;
    private int amount;

    protected Charge() {}

    Charge(String id, int amount) {
      this.id = id;
      this.amount = amount;
    }
  }

  interface Charges extends JpaRepository<Charge, String> {}

  static class Checkout {
    final Charges charges;

    Checkout(Charges charges) {
      this.charges = charges;
    }

    @Idempotent(key = "#p0")
    public String pay(String id) {
      charges.save(new Charge(id, 1));
      return "paid " + id;
    }

    /** Writes (flushed: the INSERT is sent) and then fails. */
    @Idempotent(key = "#p0")
    public String payThenFail(String id) {
      charges.saveAndFlush(new Charge(id, 1));
      throw new IllegalStateException("the provider said no");
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableJpaRepositories(basePackageClasses = IdemJpaTest.class, considerNestedRepositories = true,
      includeFilters = @ComponentScan.Filter(type = FilterType.ASSIGNABLE_TYPE, classes = Charges.class))
  static class Jpa {}

  ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db)
        // The starter's other tests run without Hibernate's auto-configuration (JpaOnlyWhenAsked); here it runs.
        .withPropertyValues("idem.test.jpa=true", "spring.jpa.hibernate.ddl-auto=none",
            "spring.jpa.open-in-view=false", "idem.executors.payments.window=1h")
        .withUserConfiguration(Jpa.class)
        .withBean(Checkout.class);
  }

  long charges(String id) {
    return db.count("SELECT count(*) FROM charge WHERE id = ?", id);
  }

  long keys(String scope, String id) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?", scope, id);
  }


  static void nothingLeftBound() {
    assertThat(TransactionSynchronizationManager.getResourceMap()).isEmpty();
    assertThat(TransactionSynchronizationManager.isSynchronizationActive()).isFalse();
  }

  @Test
  void anIdempotentMethodSavingThroughARepositoryOutsideTransactionalCommitsWithItsKey() {
    runner().run(ctx -> {
      assertThat(ctx).hasNotFailed();
      assertThat(ctx.getBean(PlatformTransactionManager.class)).isInstanceOf(JpaTransactionManager.class);
      Checkout checkout = ctx.getBean(Checkout.class);
      String id = "jpa-" + UUID.randomUUID();
      assertThat(checkout.pay(id)).isEqualTo("paid " + id);
      assertThat(checkout.pay(id)).isEqualTo("paid " + id);
      String scope = Checkout.class.getName() + ".pay";
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys(scope, id)).isEqualTo(1);
      nothingLeftBound();

      // The entity's INSERT, sent, then the method fails: it rolls back with the key, so a retry runs.
      String failed = "jpa-failed-" + UUID.randomUUID();
      assertThatThrownBy(() -> checkout.payThenFail(failed)).hasMessage("the provider said no");
      assertThat(charges(failed)).isZero();
      assertThat(keys(Checkout.class.getName() + ".payThenFail", failed)).isZero();
      nothingLeftBound();
    });
  }

  @Test
  void insideAJpaTransactionIdemJoinsIt() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      Charges charges = ctx.getBean(Charges.class);
      TransactionTemplate tx = new TransactionTemplate(ctx.getBean(PlatformTransactionManager.class));
      String id = "joined-" + UUID.randomUUID();
      tx.executeWithoutResult(status -> {
        payments.execute(IdempotencyKey.of("jpa", id), Fingerprint.EMPTY, Codec.utf8(), t -> {
          charges.saveAndFlush(new Charge(id, 1));
          return "paid";
        });
        status.setRollbackOnly();
      });
      assertThat(charges(id)).as("the entity rolled back with the JPA transaction").isZero();
      assertThat(keys("jpa", id)).as("and so did the key").isZero();
      tx.executeWithoutResult(status -> payments.execute(IdempotencyKey.of("jpa", id), Fingerprint.EMPTY, Codec.utf8(), t -> {
        charges.save(new Charge(id, 1));
        return "paid";
      }));
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys("jpa", id)).isEqualTo(1);
      nothingLeftBound();
    });
  }

  @Test
  void aJpaTransactionBegunInsideIdemsOwnIsRefusedBeforeAnythingIsWritten() {
    runner().run(ctx -> {
      IdempotentExecutor payments = ctx.getBean("idem.executors.payments", IdempotentExecutor.class);
      Charges charges = ctx.getBean(Charges.class);
      TransactionTemplate nested = new TransactionTemplate(ctx.getBean(PlatformTransactionManager.class));
      String saved = "own-save-" + UUID.randomUUID();
      // A repository's save() is @Transactional: a JPA transaction, outside any Spring transaction.
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("jpa", saved), Fingerprint.EMPTY, Codec.utf8(), t -> {
        charges.save(new Charge(saved, 1));
        return "paid";
      })).isInstanceOf(InvalidDataAccessApiUsageException.class) // the repository's translation of it
          .hasRootCauseInstanceOf(IllegalStateException.class).hasMessageContaining("a JPA transaction")
          .hasMessageContaining("with JPA, call idem inside @Transactional");
      assertThat(charges(saved)).isZero();
      assertThat(keys("jpa", saved)).isZero();
      nothingLeftBound();

      String templated = "own-template-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("jpa", templated), Fingerprint.EMPTY, Codec.utf8(), t -> {
        nested.executeWithoutResult(status -> charges.save(new Charge(templated, 1)));
        return "paid";
      })).isInstanceOf(IllegalStateException.class).hasMessageContaining("with JPA, call idem inside @Transactional");
      assertThat(charges(templated)).isZero();
      assertThat(keys("jpa", templated)).isZero();
      nothingLeftBound();
    });
  }
}
