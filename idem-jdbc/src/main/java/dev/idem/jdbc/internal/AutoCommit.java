package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;

/**
 * Runs statements on a connection of their own in auto-commit mode, so each commits at once by
 * itself, whatever transaction the calling thread has open: a read that must see what others
 * committed, or a claim that must be committed before a call goes out. Not an API.
 */
public final class AutoCommit {
  private AutoCommit() {}

  /** Said with a pool's timeout: what the user can do about it. */
  private static final String SECOND_CONNECTION = "if this was called inside a transaction on the same pool:"
      + " idem runs it on a connection of its own, so it needs a second connection while the transaction holds"
      + " the first; size the pool for two per concurrent caller that does so, or callers holding their first"
      + " wait for each other's second until the pool's timeout";

  /**
   * A connection {@code dataSource} did not give, for {@code what}: the pool's message and, when
   * the pool timed out (HikariCP's {@link SQLTransientConnectionException}), what most often makes
   * it time out there: a caller's transaction holding one connection while idem waits for a
   * second, and every other caller doing the same.
   */
  static DataAccessException noConnection(String what, SQLException e) {
    String why = e instanceof SQLTransientConnectionException ? " (" + SECOND_CONNECTION + ")" : "";
    return new DataAccessException(what + ": " + e.getMessage() + why, e);
  }

  /** Statements run on the auto-commit connection. */
  @FunctionalInterface
  public interface Work<R> {
    R run(Connection c) throws SQLException;
  }

  /**
   * Runs {@code work} on a connection from {@code dataSource} in auto-commit mode, and gives the
   * connection back in the mode it came in.
   *
   * @param what names the work in the error message, e.g. {@code "idem executor"}
   * @throws DataAccessException if a statement or the connection fails
   * @throws IllegalArgumentException if the partitioned layout refused the key ({@link SqlStates#refusedKey})
   * @throws IllegalStateException if the connection came inside a transaction that is not idem's
   *     to end ({@link OwnTransaction#refuseOpenTransaction})
   */
  public static <R> R run(DataSource dataSource, String what, Work<R> work) {
    Connection connection;
    try {
      connection = dataSource.getConnection();
    } catch (SQLException e) {
      throw noConnection(what, e);
    }
    try (Connection c = connection) {
      // Switching to auto-commit commits an open transaction: never the caller's.
      OwnTransaction.refuseOpenTransaction(c);
      boolean was = c.getAutoCommit();
      if (!was) {
        c.setAutoCommit(true);
      }
      R result;
      try {
        result = work.run(c);
      } catch (SQLException | RuntimeException | Error e) {
        if (!was) {
          try {
            c.setAutoCommit(false);
          } catch (SQLException | RuntimeException restore) {
            e.addSuppressed(restore); // the work's failure is the one to report
          }
        }
        throw e;
      }
      if (!was) {
        c.setAutoCommit(false);
      }
      return result;
    } catch (SQLException e) {
      IllegalArgumentException refused = SqlStates.refusedKey(e);
      throw refused != null ? refused : new DataAccessException(what + ": " + e.getMessage(), e);
    }
  }
}
