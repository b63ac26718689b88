package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import org.jooq.exception.DataAccessException;

/**
 * Runs work inside a savepoint of the caller's open transaction, so that a failure undoes only
 * idem's part (a claim, a recorded number) and leaves the caller's transaction usable: a caller
 * that catches and commits must not commit a claim whose effect never happened. Not an API.
 */
public final class Savepoints {
  private Savepoints() {}

  /** Work run inside the savepoint. */
  @FunctionalInterface
  public interface Work<T, X extends Exception> {
    T run() throws X;
  }

  /**
   * Sets a savepoint, runs {@code work}, and releases the savepoint; if {@code work} throws, rolls
   * back to the savepoint and releases it (a failure to do so is attached with {@code
   * addSuppressed}) and rethrows.
   *
   * @param what names the work in error messages, e.g. {@code "message m-1"}
   */
  public static <T, X extends Exception> T around(Connection c, String what, Work<T, X> work) throws X {
    Savepoint sp;
    try {
      sp = c.setSavepoint();
    } catch (SQLException e) {
      throw new DataAccessException("could not set a savepoint for " + what + ": " + e.getMessage(), e);
    }
    try {
      T result = work.run();
      release(c, sp, what); // refused when the work left the transaction aborted: roll back to sp below
      return result;
    } catch (Throwable t) {
      try {
        // ROLLBACK TO keeps the savepoint: release it too, or every failed call leaves one more
        // subtransaction open in the caller's transaction until it ends.
        c.rollback(sp);
        c.releaseSavepoint(sp);
      } catch (SQLException | RuntimeException e) {
        t.addSuppressed(e);
      }
      throw t;
    }
  }

  private static void release(Connection c, Savepoint sp, String what) {
    try {
      c.releaseSavepoint(sp);
    } catch (SQLException e) {
      throw new DataAccessException(SqlStates.is(e, SqlStates.IN_FAILED_SQL_TRANSACTION)
          ? what + ": " + OwnTransaction.ABORTED_BY_CAUGHT_ERROR + "; its part is rolled back, your transaction goes on"
          : "could not release the savepoint of " + what + ": " + e.getMessage(), e);
    }
  }
}
