package dev.idem.benchmarks;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/**
 * What a benchmark runs before every iteration of every method ({@code @Setup(Level.Iteration)},
 * off the clock): vacuums and analyzes the tables and, where the role may, checkpoints. Under JMH
 * ({@code @Fork(1)}) each method runs in a JVM of its own, on a pool and a fresh database of its
 * own (with the embedded default, a server of its own), so no method inherits another's tables;
 * what this clears is the method's own previous iterations' dead rows and dirty buffers, whose
 * clean-up is then not measured. Each iteration also starts right after a checkpoint.
 */
public final class Settle {
  private Settle() {}

  /** Vacuums and analyzes {@code tables} (names as SQL, schema-qualified where needed), then checkpoints. */
  public static void tables(DataSource ds, String tables) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("VACUUM ANALYZE " + tables);
      try {
        st.execute("CHECKPOINT");
      } catch (SQLException notAllowed) {
        // CHECKPOINT needs a superuser or pg_checkpoint; without it, the vacuum alone
      }
    }
  }

  /**
   * Vacuums and analyzes every table of the database (the guards' own tables included, whatever
   * they are named), then checkpoints.
   */
  public static void database(DataSource ds) throws SQLException {
    tables(ds, "");
  }
}
