package dev.idem.jdbc;

import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;

/**
 * What a concurrency test waits for instead of sleeping: sessions of its database waiting on a
 * lock, as PostgreSQL itself reports them ({@code pg_stat_activity}, {@code pg_locks}). A copy that
 * reaches another copy's uncommitted claim waits on a lock; once the test sees that wait, it knows
 * the copy got there, however loaded the machine. Every wait is bounded by {@link Poll#BOUND}.
 *
 * <p>Public for idem-jdbc's test packages only (it is test code, not an API).
 */
public final class LockWaits {
  private static final String WAITING = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
      + " AND wait_event_type = 'Lock' AND query LIKE ?";

  /** The mark {@link #hold} leaves in {@code pg_stat_activity.query}, to see that a copy is holding. */
  public static final String HOLD_MARK = "idem-test-hold";

  private LockWaits() {}

  /** Returns once at least {@code sessions} sessions of {@code db} wait on a lock. */
  public static void await(TestDatabase db, int sessions) throws InterruptedException {
    await(db, sessions, "%");
  }

  /**
   * Returns once at least {@code sessions} sessions of {@code db} whose statement is {@code LIKE
   * queryLike} (e.g. {@code "%idem_keys%"}) wait on a lock.
   */
  public static void await(TestDatabase db, int sessions, String queryLike) throws InterruptedException {
    Poll.until(sessions + " session(s) of " + db.name() + " waiting on a lock (query like " + queryLike + ")",
        () -> db.count(WAITING, queryLike) >= sessions);
  }

  /** Returns once the session {@code pid} (see {@link #pid}) waits on a lock. */
  public static void awaitSession(TestDatabase db, int pid) throws InterruptedException {
    Poll.until("session " + pid + " waiting on a lock",
        () -> db.count("SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'", pid) == 1);
  }

  /**
   * Returns once a session of {@code db} has been waiting on one lock for at least {@code atLeast},
   * by the database's own record of when the wait began ({@code pg_locks.waitstart}).
   */
  public static void awaitWaitedFor(TestDatabase db, Duration atLeast) throws InterruptedException {
    Poll.until("a session of " + db.name() + " waiting on a lock for " + atLeast, () -> db.count(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.datname = current_database()"
            + " AND NOT l.granted AND l.waitstart <= clock_timestamp() - ? * interval '1 microsecond'",
        atLeast.toNanos() / 1_000) > 0);
  }

  /** The server process of {@code c}'s session, as {@code pg_stat_activity.pid} names it. */
  public static int pid(Connection c) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT pg_backend_pid()")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /**
   * A statement for an effect given as statements (or run by a callback): keeps its transaction,
   * and so its claim, open until {@code sessions} sessions of the database wait on a lock, and at
   * least {@code atLeast} past the start of the statement by the database clock; fails after 20 s.
   * How a first copy holds its key until the copies racing it have piled up on it, without
   * sleeping a guessed time.
   */
  public static String hold(int sessions, Duration atLeast) {
    // pg_stat_activity is read once per transaction unless the snapshot is cleared.
    return "DO $$ /* " + HOLD_MARK + " */ BEGIN FOR i IN 1..2000 LOOP"
        + " PERFORM pg_stat_clear_snapshot();"
        + " IF (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock') >= "
        + sessions + " AND clock_timestamp() >= statement_timestamp() + interval '" + atLeast.toMillis() + " milliseconds'"
        + " THEN RETURN; END IF;"
        + " PERFORM pg_sleep(0.01);"
        + " END LOOP;"
        + " RAISE EXCEPTION 'held 20 s and fewer than " + sessions + " sessions waited on a lock'; END $$";
  }

  /** {@link #hold(int, Duration)} with no least duration. */
  public static String hold(int sessions) {
    return hold(sessions, Duration.ZERO);
  }
}
