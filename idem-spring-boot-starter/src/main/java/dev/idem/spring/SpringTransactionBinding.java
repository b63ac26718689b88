package dev.idem.spring;

import dev.idem.jdbc.tx.TransactionBinding;
import java.sql.Connection;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Spring's transaction as idem's: inside {@code @Transactional} or a {@code TransactionTemplate},
 * every idem call joins the transaction on the connection Spring bound to this thread for the
 * DataSource (the one JdbcTemplate and jOOQ use), so the key commits or rolls back with the
 * effect's rows.
 *
 * <p>Outside a Spring transaction, idem runs the caller's code (an executor's effect, an inbox's,
 * {@code Idem.inTransaction}) in a transaction of its own, and lends it to Spring for the code's
 * duration ({@link #ownTransaction}): {@code JdbcTemplate}, {@code DataSourceUtils} and a nested
 * {@code TransactionTemplate} or {@code @Transactional} (REQUIRED) method of {@code
 * DataSourceTransactionManager} or {@code JdbcTransactionManager} run on idem's connection and
 * commit with the key. A participant that fails marks it rollback-only: idem then rolls back and
 * throws Spring's {@code UnexpectedRollbackException}. {@code REQUIRES_NEW} still commits apart, as
 * asked. Synchronizations registered meanwhile run around idem's commit, and {@code afterCompletion}
 * hears how it ended ({@code STATUS_UNKNOWN} if the connection failed during the commit).
 *
 * <p>JPA cannot take part in idem's own transaction: a transaction of {@code
 * JpaTransactionManager} begun there (a nested {@code @Transactional}, a Spring Data repository's
 * {@code save}) is refused with an {@link IllegalStateException} before its {@code EntityManager}
 * is made, and an {@code EntityManager} used without one is refused before the commit; either way
 * everything is rolled back. With JPA, call idem inside {@code @Transactional}, which idem joins
 * (an {@code @Idempotent} method begins one itself).
 *
 * <p>Never guesses: a Spring transaction that is read-only, or that holds no connection of this
 * DataSource (a transaction manager of another DataSource, or JTA without one bound), is refused
 * with an {@link IllegalStateException} before idem writes anything, rather than committed apart.
 *
 * <p>Joins the transactions of {@code DataSourceTransactionManager}, {@code JdbcTransactionManager}
 * and {@code JpaTransactionManager} (which binds its JDBC connection too).
 */
public final class SpringTransactionBinding implements TransactionBinding {
  private final DataSource dataSource;

  /**
   * A binding to the transactions Spring runs on {@code dataSource} (a {@code
   * TransactionAwareDataSourceProxy} is unwrapped: Spring binds the target's connection).
   */
  public SpringTransactionBinding(DataSource dataSource) {
    if (dataSource == null) {
      throw new IllegalArgumentException("dataSource must not be null");
    }
    this.dataSource = unwrap(dataSource);
  }

  /** {@code dataSource} without a {@code TransactionAwareDataSourceProxy} around it. */
  public static DataSource unwrap(DataSource dataSource) {
    DataSource d = dataSource;
    while (d instanceof TransactionAwareDataSourceProxy proxy && proxy.getTargetDataSource() != null) {
      d = proxy.getTargetDataSource();
    }
    return d;
  }

  @Override
  public Connection currentConnection() {
    if (!TransactionSynchronizationManager.isActualTransactionActive()) {
      return null;
    }
    String name = TransactionSynchronizationManager.getCurrentTransactionName();
    if (TransactionSynchronizationManager.isCurrentTransactionReadOnly()) {
      throw new IllegalStateException("the Spring transaction open on this thread (" + name + ") is read-only,"
          + " and idem writes its key there: call idem outside it, or from a read-write transaction"
          + " (@Transactional without readOnly = true)");
    }
    // DataSourceTransactionManager marks its holder synchronized; JpaTransactionManager binds a plain
    // one whose handle gives the EntityManager's connection. A connection in auto-commit (DataSourceUtils
    // inside another manager's transaction) is refused by idem before it writes.
    if (TransactionSynchronizationManager.getResource(dataSource) instanceof ConnectionHolder holder
        && holder.getConnectionHandle() != null) {
      return holder.getConnection();
    }
    throw new IllegalStateException("a Spring transaction is open on this thread (" + name + ") but holds no"
        + " connection of idem's DataSource, so idem cannot join it and will not commit on a connection of its own:"
        + " run idem's calls in a transaction of the transaction manager of that DataSource");
  }

  /** idem's own transaction as Spring's, on this DataSource, until idem ends it. */
  @Override
  public Lent ownTransaction(Connection connection) {
    return LentTransaction.lend(dataSource, connection);
  }
}
