package dev.idem.benchmarks;

import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;

/** The yardstick every guard is measured against: the same work in a plain JDBC transaction. */
public final class BareTransaction {
  private BareTransaction() {}

  /** The work, on the transaction's connection. */
  @FunctionalInterface
  public interface Work<T> {
    T run(Connection c) throws SQLException;
  }

  /** Runs {@code work} in one transaction on a connection from {@code ds}, and commits. */
  public static <T> T run(DataSource ds, Work<T> work) throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try {
        T result = work.run(c);
        c.commit();
        return result;
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(true);
      }
    }
  }
}
