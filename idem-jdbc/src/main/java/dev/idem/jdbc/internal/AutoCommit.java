package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;

/**
 * Runs statements on a connection of their own in auto-commit mode, so each commits at once by
 * itself, whatever transaction the calling thread has open: a read that must see what others
 * committed, or a claim that must be committed before a call goes out. Not an API.
 */
public final class AutoCommit {
  private AutoCommit() {}

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
   */
  public static <R> R run(DataSource dataSource, String what, Work<R> work) {
    try (Connection c = dataSource.getConnection()) {
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
