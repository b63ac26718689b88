package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;

/**
 * What pgjdbc knows of a connection, asked without a round trip. A connection that cannot be
 * unwrapped to pgjdbc's (a wrapper that hides it) answers false: idem then acts as it would on a
 * connection in the default state. Not an API.
 */
public final class Driver {
  private Driver() {}

  /**
   * True if pgjdbc reports the connection's transaction aborted: a statement failed and its error
   * was caught, so PostgreSQL ignores everything until the rollback (a COMMIT then rolls back).
   * pgjdbc tracks this from the server's answers. False for a connection that is not pgjdbc's
   * underneath: such a driver reports a failed commit itself or not at all.
   */
  public static boolean aborted(Connection c) {
    try {
      return c.isWrapperFor(BaseConnection.class)
          && c.unwrap(BaseConnection.class).getTransactionState() == TransactionState.FAILED;
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }

  /**
   * Refuses a caller's transaction that is {@link #aborted}, before a joined call sends anything
   * into it: nothing would run there, and a rollback to a savepoint's name after the savepoint
   * itself failed could find an outer call's savepoint of that name and undo its work. {@code
   * what} names the call's key or message in the message.
   *
   * @throws IllegalArgumentException if the transaction on {@code callerTx} is aborted
   */
  public static void refuseAborted(Connection callerTx, String what) {
    if (aborted(callerTx)) {
      throw new IllegalArgumentException("callerTx: its transaction is aborted (a statement in it failed and its error"
          + " was caught); roll it back: nothing of " + what + " was sent");
    }
  }

  /**
   * Runs {@code sql}, a savepoint command, without pgjdbc's {@code autosave} wrapping it: on an
   * aborted transaction autosave would first set a savepoint of its own, which PostgreSQL refuses
   * there, and the rollback to idem's savepoint would never be sent (pgjdbc 42.7.8, the version
   * Spring Boot 3.5 manages). Through the statement API when the connection is not pgjdbc's.
   */
  public static void savepointCommand(Connection c, String sql) throws SQLException {
    if (c.isWrapperFor(BaseConnection.class)) {
      c.unwrap(BaseConnection.class).execSQLUpdate(sql); // no autosave savepoint in an aborted transaction
      return;
    }
    try (Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  /**
   * True if pgjdbc reports a transaction open (or aborted) on a connection a {@code DataSource} just
   * handed out: the DataSource gives out the thread's current transaction (Spring's {@code
   * TransactionAwareDataSourceProxy}, say), and a transaction idem began and committed there would
   * commit the caller's work with it. False when it cannot tell (not pgjdbc's underneath).
   */
  public static boolean inTransaction(Connection c) {
    try {
      return c.isWrapperFor(BaseConnection.class)
          && c.unwrap(BaseConnection.class).getTransactionState() != TransactionState.IDLE;
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }
}
