package dev.idem.benchmarks;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/**
 * What a benchmark runs before every iteration of every method ({@code @Setup(Level.Iteration)}):
 * clears what the previous method's writes left for autovacuum and, where the role may, the dirty
 * buffers a checkpoint would write, so no method pays for the one JMH ran before it (JMH runs a
 * class's methods in alphabetical order). Each method still pays, within its own iterations, for
 * what it writes itself.
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
}
