package dev.idem.spring;

import dev.idem.jdbc.tx.TransactionBinding;
import java.sql.Connection;
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
 * takes part in it, and synchronizations registered meanwhile run around idem's commit. Whatever
 * Spring had bound on the thread before (a non-transactional scope's synchronizations, a suspended
 * connection) is set aside and put back at the end.
 */
final class LentTransaction implements TransactionBinding.Lent {
  private static final String ENTITY_MANAGER_HOLDER = "org.springframework.orm.jpa.EntityManagerHolder";

  private final DataSource dataSource;
  private final Held held;
  private final Outer outer;
  private boolean completing;

  /** Spring's view of a connection idem owns: a transaction active on it, never ended by Spring. */
  private static final class Held extends ConnectionHolder {
    Held(Connection connection) {
      super(connection, true);
      setSynchronizedWithTransaction(true);
    }
  }

  /** What Spring had on the thread before idem lent its transaction, put back at the end. */
  private record Outer(Object resource, List<TransactionSynchronization> synchronizations, String name,
      boolean readOnly, Integer isolation, boolean active) {

    static Outer setAside(DataSource dataSource) {
      List<TransactionSynchronization> synchronizations = null;
      if (TransactionSynchronizationManager.isSynchronizationActive()) {
        synchronizations = TransactionSynchronizationManager.getSynchronizations();
        synchronizations.forEach(TransactionSynchronization::suspend); // JdbcTemplate's unbinds its connection here
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
    TransactionSynchronizationManager.bindResource(dataSource, held);
    TransactionSynchronizationManager.initSynchronization();
    TransactionSynchronizationManager.setActualTransactionActive(true);
    TransactionSynchronizationManager.setCurrentTransactionName("idem's own transaction");
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
    completing = true;
    TransactionSynchronizationUtils.triggerBeforeCommit(false);
    TransactionSynchronizationUtils.triggerBeforeCompletion();
  }

  @Override
  public void end(boolean committed) {
    try {
      List<TransactionSynchronization> synchronizations = TransactionSynchronizationManager.getSynchronizations();
      if (!completing) {
        TransactionSynchronizationUtils.triggerBeforeCompletion(); // a rollback: Spring tells them too
      }
      try {
        if (committed) {
          TransactionSynchronizationUtils.invokeAfterCommit(synchronizations);
        }
      } finally {
        TransactionSynchronizationUtils.invokeAfterCompletion(synchronizations,
            committed ? TransactionSynchronization.STATUS_COMMITTED : TransactionSynchronization.STATUS_ROLLED_BACK);
      }
    } finally {
      TransactionSynchronizationManager.clearSynchronization();
      TransactionSynchronizationManager.unbindResourceIfPossible(dataSource);
      clearState();
      held.clear();
      outer.putBack(dataSource);
    }
  }

  private static void clearState() {
    TransactionSynchronizationManager.setCurrentTransactionName(null);
    TransactionSynchronizationManager.setCurrentTransactionReadOnly(false);
    TransactionSynchronizationManager.setCurrentTransactionIsolationLevel(null);
    TransactionSynchronizationManager.setActualTransactionActive(false);
  }
}
