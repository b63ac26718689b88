package dev.idem.jdbc.internal;

import dev.idem.jdbc.tx.TransactionBinding;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A transaction idem begins and ends itself: auto-commit off, the work, commit, or rollback when
 * the work fails; then auto-commit set back. The work's failure is thrown as it was, whatever its
 * type: a failure of idem's own steps after it (rollback, resetting or closing the connection) is
 * attached to it with {@code addSuppressed}, never thrown in its place. Neither joins an open
 * transaction nor runs the work again. Not an API.
 */
public final class OwnTransaction {
  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.transactions");

  /** Why work that returned normally could not commit: it swallowed the failure of a statement. */
  public static final String ABORTED_BY_CAUGHT_ERROR = "an earlier statement failed and the work caught its error without"
      + " rethrowing it, so PostgreSQL aborted the transaction";

  private OwnTransaction() {}

  /** The work, given the transaction's connection. */
  @FunctionalInterface
  public interface Work<T, X extends Exception> {
    T run(Connection c) throws X;
  }

  /**
   * Work that runs the caller's code and may end the transaction itself (a statement that ends in
   * {@code COMMIT}): it calls {@link Ending#beforeCommit} first, which may veto by throwing, and
   * {@link Ending#committed} once that statement succeeded.
   */
  @FunctionalInterface
  public interface LentWork<T, X extends Exception> {
    T run(Connection c, Ending ending) throws X;
  }

  /**
   * How far idem's own transaction got in its ending, so the binding is told what happened (a
   * commit sent by the work's last statement, then a failure, is still a commit).
   */
  public static final class Ending {
    private final TransactionBinding.Lent lent;
    private boolean asked;
    private boolean committing;
    private boolean committed;

    private Ending(TransactionBinding.Lent lent) {
      this.lent = lent;
    }

    /**
     * The binding's veto, asked once (idem asks again before its own commit); once passed, the
     * commit is on its way.
     */
    public void beforeCommit() {
      if (!asked) {
        asked = true;
        lent.beforeCommit(); // may veto: a participant of the framework's marked it rollback-only
      }
      committing = true;
    }

    /** The work's own statement that ends in {@code COMMIT} succeeded. */
    public void committed() {
      committed = true;
    }

    /** How the transaction ended after {@code failure} (null: none). */
    private TransactionBinding.Lent.Outcome outcome(Throwable failure) {
      if (committed) {
        return TransactionBinding.Lent.Outcome.COMMITTED;
      }
      // A commit under way when the connection failed may have reached the server; any other
      // failure (the server's own answer, or one before the commit) leaves nothing committed.
      return committing && failure != null && SqlStates.isConnectionFailure(failure)
          ? TransactionBinding.Lent.Outcome.UNKNOWN : TransactionBinding.Lent.Outcome.ROLLED_BACK;
    }
  }

  @FunctionalInterface
  private interface Step {
    void run() throws SQLException;
  }

  /**
   * A connection handed out inside a transaction: if that transaction has written nothing and
   * holds no lock (a pool in manual commit that ran its test query on it), it is rolled back and
   * true returned; otherwise (a transaction-aware DataSource handing out the caller's, which may
   * have written, or locked a table or read rows it relies on), false: it is not idem's to end. On
   * MariaDB always false.
   */
  private static boolean endUnwritten(Connection c) {
    if (!Driver.postgres(c)) {
      // MariaDB tells no session at once what its transaction has written or locked (InnoDB's
      // information_schema.innodb_trx is refreshed at most every 100 ms): a transaction open on a
      // connection handed out is never idem's to end there.
      return false;
    }
    try (Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("select txid_current_if_assigned() is null and not exists (select 1"
            + " from pg_catalog.pg_locks where pid = pg_backend_pid() and locktype <> 'virtualxid'"
            + " and relation is distinct from 'pg_catalog.pg_locks'::regclass)")) {
      if (rs.next() && rs.getBoolean(1)) {
        if (c.getAutoCommit()) {
          st.execute("rollback");
        } else {
          c.rollback();
        }
        return true;
      }
      return false;
    } catch (SQLException e) {
      throw new DataAccessException("could not inspect the transaction the DataSource handed out: " + e.getMessage(), e);
    }
  }

  /**
   * Refuses a connection a {@code DataSource} handed out inside a transaction that is not idem's
   * to end (one that has written or holds a lock, or any on MariaDB; see {@link #endUnwritten}):
   * a transaction idem began and committed there, or a switch to auto-commit, would commit the
   * caller's work with it, behind its back.
   *
   * @throws IllegalStateException saying so
   */
  static void refuseOpenTransaction(Connection c) {
    if (Driver.inTransaction(c) && !endUnwritten(c)) {
      throw new IllegalStateException("the DataSource handed idem a connection inside an open transaction (is it"
          + " transaction-aware, such as Spring's TransactionAwareDataSourceProxy?); idem would commit that"
          + " transaction: give idem the pool itself, and join a framework's transaction through"
          + " Idem.builder(...).transactionBinding(...) or by passing its connection");
    }
  }

  /** Runs {@code work} in a transaction on a connection from {@code dataSource}, then returns the connection. */
  public static <T, X extends Exception> T run(DataSource dataSource, Work<T, X> work) throws X {
    return run(dataSource, TransactionBinding.NONE, (c, ending) -> work.run(c));
  }

  /**
   * {@link #run(DataSource, Work)} for work that runs the caller's code: {@code binding} lends the
   * transaction to the caller's framework for its duration ({@link TransactionBinding#ownTransaction}).
   */
  public static <T, X extends Exception> T run(DataSource dataSource, TransactionBinding binding, LentWork<T, X> work)
      throws X {
    Connection c;
    try {
      c = dataSource.getConnection();
    } catch (SQLException e) {
      throw AutoCommit.noConnection("could not get a connection from the DataSource", e);
    }
    Throwable failure = null;
    try {
      refuseOpenTransaction(c);
      return on(c, binding, work);
    } catch (Throwable t) {
      failure = t;
      throw t;
    } finally {
      cleanUp(c::close, "close its connection", failure);
    }
  }

  /**
   * {@link #run}, at READ COMMITTED whatever the pool's isolation level: for idem's own transactions
   * that rest on row locks ({@code FOR UPDATE SKIP LOCKED}) and never on a snapshot, such as a relay
   * batch or an expiry batch. At REPEATABLE READ a row another transaction changed after this one's
   * snapshot fails its lock with 40001, and at SERIALIZABLE two such transactions reading each
   * other's rows abort one another; a relay batch would then publish again what it had published.
   * Never for a transaction that runs the caller's code on its connection: its level is the caller's.
   */
  public static <T, X extends Exception> T runReadCommitted(DataSource dataSource, Work<T, X> work) throws X {
    // run() ends a transaction a pool handed out already begun (its test query), so SET TRANSACTION
    // is the first statement here.
    return run(dataSource, c -> {
      try {
        readCommitted(c);
      } catch (SQLException e) {
        throw new DataAccessException("could not begin a READ COMMITTED transaction: " + e.getMessage(), e);
      }
      return work.run(c);
    });
  }

  private static void readCommitted(Connection c) throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); // this transaction only
    }
  }

  /** Runs {@code work} in a transaction on {@code c}, which must have none open. */
  public static <T, X extends Exception> T on(Connection c, Work<T, X> work) throws X {
    return on(c, TransactionBinding.NONE, (conn, ending) -> work.run(conn));
  }

  private static <T, X extends Exception> T on(Connection c, TransactionBinding binding, LentWork<T, X> work) throws X {
    boolean autoCommit;
    try {
      autoCommit = c.getAutoCommit();
      if (autoCommit) {
        c.setAutoCommit(false);
      }
    } catch (SQLException e) {
      throw new DataAccessException("could not begin a transaction: " + e.getMessage(), e);
    }
    Throwable failure = null;
    Ending ending = null;
    Driver.forgetRolledBack(c); // a mark a caller's transaction left on this connection is not this one's
    try {
      Ending e = ending = new Ending(binding.ownTransaction(c));
      T result = work.run(c, e);
      e.beforeCommit();
      try {
        if (Driver.aborted(c)) {
          // pgjdbc sends COMMIT, PostgreSQL answers ROLLBACK, and no error is raised: the caller
          // would be told "done" for work that is gone.
          throw new DataAccessException("could not commit: " + ABORTED_BY_CAUGHT_ERROR + "; nothing of it is committed");
        }
        SQLException rolledBack = Driver.rolledBackBy(c);
        if (rolledBack != null) {
          // MariaDB: a call in it saw the server roll it back (a deadlock whose error was caught);
          // what ran since is a new transaction, which a commit would keep as if it were this one.
          throw new DataAccessException("could not commit: " + rolledBack.getMessage() + "; nothing of it is committed",
              rolledBack);
        }
        c.commit();
        e.committed();
      } catch (SQLException ex) {
        throw new DataAccessException("could not commit: " + ex.getMessage(), ex);
      }
      return result;
    } catch (Throwable t) {
      failure = t;
      rollback(c, t);
      throw t;
    } finally {
      if (ending != null) {
        // After the rollback: the framework's completion callbacks see the transaction ended.
        Ending e = ending;
        TransactionBinding.Lent.Outcome outcome = e.outcome(failure);
        cleanUp(() -> e.lent.end(outcome), "end the transaction binding's use of it", failure);
      }
      Driver.forgetRolledBack(c);
      if (autoCommit) {
        cleanUp(() -> c.setAutoCommit(true), "set its connection back to auto-commit", failure);
      }
    }
  }

  /** Rolls back after {@code failure}; a failure to roll back is attached to it, never hides it. */
  public static void rollback(Connection c, Throwable failure) {
    try {
      c.rollback();
    } catch (SQLException | RuntimeException e) {
      failure.addSuppressed(e);
    }
  }

  /**
   * A step after the work. Its failure (the connection died) is attached to the work's failure if
   * there is one. After a commit it is only logged: the work is committed, and reporting it as
   * failed would make the caller repeat it; the pool finds the broken connection on its own.
   */
  private static void cleanUp(Step step, String what, Throwable failure) {
    try {
      step.run();
    } catch (SQLException | RuntimeException e) {
      if (failure != null) {
        failure.addSuppressed(e);
      } else if (SqlStates.isConnectionFailure(e)) {
        // The connection ended after the commit (killed, or the server went away): the pool drops
        // it; its cause says all there is to say, without a stack trace.
        LOG.warn("transaction committed, but could not {}: the connection ended ({})", what, e.getMessage());
      } else {
        LOG.warn("transaction committed, but could not " + what, e);
      }
    }
  }
}
