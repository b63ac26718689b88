package dev.idem.spring;

import dev.idem.jdbc.tx.TransactionBinding;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionSynchronizationUtils;

/**
 * idem's own transaction, made Spring's for the caller's code: its connection bound for the
 * DataSource as an active transaction with synchronization, so {@code JdbcTemplate} and {@code
 * DataSourceUtils} use it, a nested {@code TransactionTemplate} or {@code @Transactional} (REQUIRED)
 * takes part in it, {@code REQUIRES_NEW} suspends it and commits apart, and synchronizations
 * registered meanwhile run around idem's commit. Whatever Spring had bound on the thread before (a
 * non-transactional scope's synchronizations, a suspended connection) is set aside and put back at
 * the end, also when lending fails part way.
 *
 * <p>{@code JpaTransactionManager} cannot take part (it looks for an {@code EntityManager} of its
 * own and would bind a second connection for the DataSource): a JPA transaction begun inside is
 * refused with an {@link IllegalStateException} before its {@code EntityManager} is made, so idem
 * rolls back with nothing of JPA's written.
 */
final class LentTransaction implements TransactionBinding.Lent {
  private static final String ENTITY_MANAGER_HOLDER = "org.springframework.orm.jpa.EntityManagerHolder";

  private final DataSource dataSource;
  private final Held held;
  private final Outer outer;
  private boolean completing;

  /** Spring's view of a connection idem owns: a transaction active on it, never ended by Spring. */
  private static final class Held extends ConnectionHolder {
    /** Set while a transaction manager has suspended the synchronizations to begin a transaction. */
    private boolean beginning;

    Held(Connection connection) {
      super(connection, true);
      setSynchronizedWithTransaction(true);
    }

    /**
     * Asked by {@code JpaTransactionManager.doBegin} first of all, holding this connection because
     * it is bound for its DataSource but seeing no transaction of its own to join. A {@code
     * DataSourceTransactionManager} beginning {@code REQUIRES_NEW} unbinds this holder instead, and
     * JdbcTemplate never asks while the holder has its connection.
     */
    @Override
    public boolean isSynchronizedWithTransaction() {
      if (beginning) {
        throw new IllegalStateException("a JPA transaction (JpaTransactionManager: @Transactional, TransactionTemplate"
            + " or a Spring Data repository's method) began inside idem's own transaction, which it cannot join: its"
            + " EntityManager would write on a second connection and commit apart from the key; with JPA, call idem"
            + " inside @Transactional, which idem joins (an @Idempotent method begins one itself)");
      }
      return super.isSynchronizedWithTransaction();
    }
  }

  /** Marks {@link Held} while a transaction manager begins a transaction inside idem's. */
  private static final class BeginWatch implements TransactionSynchronization, org.springframework.core.Ordered {
    private final Held held;

    BeginWatch(Held held) {
      this.held = held;
    }

    @Override
    public int getOrder() {
      return HIGHEST_PRECEDENCE;
    }

    @Override
    public void suspend() {
      held.beginning = true;
    }

    @Override
    public void resume() {
      held.beginning = false;
    }
  }

  /** What Spring had on the thread before idem lent its transaction, put back at the end. */
  private record Outer(Object resource, List<TransactionSynchronization> synchronizations, String name,
      boolean readOnly, Integer isolation, boolean active) {

    /** Sets aside what Spring has on the thread; if a synchronization refuses, leaves it as it was. */
    static Outer setAside(DataSource dataSource) {
      List<TransactionSynchronization> synchronizations = null;
      if (TransactionSynchronizationManager.isSynchronizationActive()) {
        synchronizations = TransactionSynchronizationManager.getSynchronizations();
        List<TransactionSynchronization> suspended = new ArrayList<>();
        try {
          for (TransactionSynchronization s : synchronizations) {
            s.suspend(); // JdbcTemplate's unbinds its connection here
            suspended.add(s);
          }
        } catch (RuntimeException | Error e) {
          suspended.forEach(TransactionSynchronization::resume);
          throw e;
        }
        TransactionSynchronizationManager.clearSynchronization();
      }
      Outer outer = new Outer(TransactionSynchronizationManager.unbindResourceIfPossible(dataSource), synchronizations,
          TransactionSynchronizationManager.getCurrentTransactionName(),
          TransactionSynchronizationManager.isCurrentTransactionReadOnly(),
          TransactionSynchronizationManager.getCurrentTransactionIsolationLevel(),
          TransactionSynchronizationManager.isActualTransactionActive());
      clearState();
      return outer;
    }

    void putBack(DataSource dataSource) {
      if (resource != null) {
        TransactionSynchronizationManager.bindResource(dataSource, resource);
      }
      TransactionSynchronizationManager.setCurrentTransactionName(name);
      TransactionSynchronizationManager.setCurrentTransactionReadOnly(readOnly);
      TransactionSynchronizationManager.setCurrentTransactionIsolationLevel(isolation);
      TransactionSynchronizationManager.setActualTransactionActive(active);
      if (synchronizations != null) {
        TransactionSynchronizationManager.initSynchronization();
        for (TransactionSynchronization s : synchronizations) {
          s.resume();
          TransactionSynchronizationManager.registerSynchronization(s);
        }
      }
    }
  }

  private LentTransaction(DataSource dataSource, Connection connection) {
    this.dataSource = dataSource;
    this.outer = Outer.setAside(dataSource);
    this.held = new Held(connection);
    try {
      TransactionSynchronizationManager.bindResource(dataSource, held);
      TransactionSynchronizationManager.initSynchronization();
      TransactionSynchronizationManager.registerSynchronization(new BeginWatch(held));
      TransactionSynchronizationManager.setActualTransactionActive(true);
      TransactionSynchronizationManager.setCurrentTransactionName("idem's own transaction");
    } catch (RuntimeException | Error e) {
      undo();
      throw e;
    }
  }

  /** {@code connection}, idem's, as Spring's transaction on {@code dataSource} until {@link #end}. */
  static LentTransaction lend(DataSource dataSource, Connection connection) {
    return new LentTransaction(dataSource, connection);
  }

  @Override
  public void beforeCommit() {
    if (held.isRollbackOnly()) {
      throw new UnexpectedRollbackException("a Spring transaction that took part in idem's own transaction (a nested"
          + " TransactionTemplate or @Transactional method) marked it rollback-only: idem rolled back the effect and its key");
    }
    for (Object resource : TransactionSynchronizationManager.getResourceMap().values()) {
      // An EntityManager bound before (open-in-view) is synchronized only if the code used it here.
      if (resource instanceof ResourceHolderSupport holder && holder.isSynchronizedWithTransaction()
          && resource.getClass().getName().equals(ENTITY_MANAGER_HOLDER)) {
        // Its EntityManager writes on a connection of its own (or not at all: no JPA transaction is
        // open), which would commit apart from the key, or never.
        throw new IllegalStateException("JPA was used in idem's own transaction (outside any Spring transaction), where"
            + " its EntityManager cannot join idem's connection: idem rolled back; call idem inside @Transactional with"
            + " JpaTransactionManager, which idem joins");
      }
    }
    TransactionSynchronizationUtils.triggerBeforeCommit(false);
    // Only now: a beforeCommit that threw leaves the beforeCompletion calls to end(), as Spring does.
    completing = true;
    TransactionSynchronizationUtils.triggerBeforeCompletion();
  }

  @Override
  public void end(Outcome outcome) {
    try {
      List<TransactionSynchronization> synchronizations = TransactionSynchronizationManager.getSynchronizations();
      if (!completing) {
        TransactionSynchronizationUtils.triggerBeforeCompletion(); // a rollback: Spring tells them too
      }
      try {
        if (outcome == Outcome.COMMITTED) {
          TransactionSynchronizationUtils.invokeAfterCommit(synchronizations);
        }
      } finally {
        TransactionSynchronizationUtils.invokeAfterCompletion(synchronizations, switch (outcome) {
          case COMMITTED -> TransactionSynchronization.STATUS_COMMITTED;
          case ROLLED_BACK -> TransactionSynchronization.STATUS_ROLLED_BACK;
          case UNKNOWN -> TransactionSynchronization.STATUS_UNKNOWN;
        });
      }
    } finally {
      undo();
    }
  }

  /** Takes idem's lending off the thread and puts back what was there before. */
  private void undo() {
    if (TransactionSynchronizationManager.isSynchronizationActive()) {
      TransactionSynchronizationManager.clearSynchronization();
    }
    TransactionSynchronizationManager.unbindResourceIfPossible(dataSource);
    clearState();
    held.clear();
    outer.putBack(dataSource);
  }

  private static void clearState() {
    TransactionSynchronizationManager.setCurrentTransactionName(null);
    TransactionSynchronizationManager.setCurrentTransactionReadOnly(false);
    TransactionSynchronizationManager.setCurrentTransactionIsolationLevel(null);
    TransactionSynchronizationManager.setActualTransactionActive(false);
  }
}
