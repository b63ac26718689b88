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
 * lock, as the database itself reports them (PostgreSQL: {@code pg_stat_activity}, {@code
 * pg_locks}; MariaDB: InnoDB's {@code information_schema.innodb_trx}, whose state is {@code LOCK
 * WAIT} while a transaction waits for a row lock, joined to the processlist for the database and
 * the statement). A copy that
 * reaches another copy's uncommitted claim waits on a lock; once the test sees that wait, it knows
 * the copy got there, however loaded the machine. Every wait is bounded by {@link Poll#BOUND}.
 *
 * <p>Public for idem-jdbc's test packages only (it is test code, not an API).
 */
public final class LockWaits {
  private static final String WAITING = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
      + " AND wait_event_type = 'Lock' AND query LIKE ?";
  /** MariaDB: the transactions of this database waiting for a row lock. */
  private static final String MARIA_WAITS = " FROM information_schema.innodb_trx t JOIN information_schema.processlist p"
      + " ON p.id = t.trx_mysql_thread_id WHERE p.db = database() AND t.trx_state = 'LOCK WAIT'";

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
        () -> db.count(VendorSql.maria(db) ? "SELECT count(*)" + MARIA_WAITS + " AND t.trx_query LIKE ?" : WAITING,
            queryLike) >= sessions);
  }

  /** Returns once the session {@code pid} (see {@link #pid}) waits on a lock. */
  public static void awaitSession(TestDatabase db, int pid) throws InterruptedException {
    Poll.until("session " + pid + " waiting on a lock",
        () -> db.count(VendorSql.maria(db)
            ? "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"
            : "SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'", pid) == 1);
  }

  /**
   * Returns once a session of {@code db} has been waiting on one lock for at least {@code atLeast},
   * by the database's own record of when the wait began ({@code pg_locks.waitstart}; MariaDB:
   * {@code innodb_trx.trx_wait_started}, whole seconds in the server's zone, cut down: a second
   * more is waited for, so the wait is never shorter than asked).
   */
  public static void awaitWaitedFor(TestDatabase db, Duration atLeast) throws InterruptedException {
    if (VendorSql.maria(db)) {
      Poll.until("a session of " + db.name() + " waiting on a lock for " + atLeast, () -> db.count("SELECT count(*)"
          + MARIA_WAITS + " AND t.trx_wait_started <= NOW() - INTERVAL ? MICROSECOND", atLeast.toNanos() / 1_000 + 1_000_000) > 0);
      return;
    }
    Poll.until("a session of " + db.name() + " waiting on a lock for " + atLeast, () -> db.count(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.datname = current_database()"
            + " AND NOT l.granted AND l.waitstart <= clock_timestamp() - ? * interval '1 microsecond'",
        atLeast.toNanos() / 1_000) > 0);
  }

  /**
   * The server process of {@code c}'s session, as {@code pg_stat_activity.pid} names it (MariaDB:
   * its connection id, the processlist's).
   */
  public static int pid(Connection c) throws SQLException {
    boolean maria = c.getMetaData().getDatabaseProductName().toLowerCase(java.util.Locale.ROOT).contains("mariadb");
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(maria ? "SELECT CONNECTION_ID()" : "SELECT pg_backend_pid()")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /**
   * A statement for an effect given as statements (or run by a callback): keeps its transaction,
   * and so its claim, open until {@code sessions} sessions of the database wait on a lock, and at
   * least {@code atLeast} past the start of the statement by the database clock; fails after 20 s.
   * How a first copy holds its key until the copies racing it have piled up on it, without
   * sleeping a guessed time. PostgreSQL's form; {@link #hold(TestDatabase, int, Duration)} gives
   * either database's.
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

  /**
   * {@link #hold(int, Duration)} in {@code db}'s SQL. MariaDB: an anonymous compound statement
   * ({@code BEGIN NOT ATOMIC}) polling InnoDB's lock waits, which InnoDB refreshes at most every
   * 100 ms; the mark is in its text, as the processlist shows it.
   */
  public static String hold(TestDatabase db, int sessions, Duration atLeast) {
    if (!VendorSql.maria(db)) {
      return hold(sessions, atLeast);
    }
    return "BEGIN NOT ATOMIC /* " + HOLD_MARK + " */ DECLARE i INT DEFAULT 0; DECLARE done INT DEFAULT 0;"
        + " DECLARE started DATETIME(6) DEFAULT SYSDATE(6);"
        + " WHILE i < 2000 AND done = 0 DO"
        + " IF (SELECT count(*)" + MARIA_WAITS + ") >= " + sessions
        + " AND SYSDATE(6) >= started + INTERVAL " + atLeast.toNanos() / 1_000 + " MICROSECOND THEN SET done = 1;"
        + " ELSE DO SLEEP(0.01); SET i = i + 1; END IF;"
        + " END WHILE;"
        + " IF done = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'held 20 s and fewer than " + sessions
        + " sessions waited on a lock'; END IF; END";
  }

  /** {@link #hold(TestDatabase, int, Duration)} with no least duration. */
  public static String hold(TestDatabase db, int sessions) {
    return hold(db, sessions, Duration.ZERO);
  }

  /** Returns once a session of {@code db} other than the asking one runs a statement holding {@link #HOLD_MARK}. */
  public static void awaitHolding(TestDatabase db) throws InterruptedException {
    Poll.until("a session of " + db.name() + " running " + HOLD_MARK, () -> db.count(VendorSql.maria(db)
        ? "SELECT count(*) FROM information_schema.processlist WHERE db = database() AND command = 'Query'"
            + " AND info LIKE ? AND id <> CONNECTION_ID()"
        : "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE ? AND pid <> pg_backend_pid()",
        "%" + HOLD_MARK + "%") > 0);
  }
}
