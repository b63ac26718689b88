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
 * pg_locks}; MariaDB: the transactions InnoDB's status lists in {@code LOCK WAIT}, with how long
 * each has waited, their database and statement from the processlist. Not InnoDB's {@code
 * information_schema.innodb_trx}: it leaves out some waiting transactions, such as an auto-commit
 * {@code INSERT .. SELECT .. LOCK IN SHARE MODE}, an external claim's). A copy that
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
        () -> (VendorSql.maria(db) ? mariaWaiting(db, queryLike, 0) : db.count(WAITING, queryLike)) >= sessions);
  }

  /** Returns once the session {@code pid} (see {@link #pid}) waits on a lock. */
  public static void awaitSession(TestDatabase db, int pid) throws InterruptedException {
    Poll.until("session " + pid + " waiting on a lock",
        () -> VendorSql.maria(db) ? mariaWaits(db).containsKey((long) pid)
            : db.count("SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'", pid) == 1);
  }

  /**
   * Returns once a session of {@code db} has been waiting on one lock for at least {@code atLeast},
   * by the database's own record of when the wait began ({@code pg_locks.waitstart}; MariaDB: how
   * long InnoDB's status says the transaction has been waiting for its lock).
   */
  public static void awaitWaitedFor(TestDatabase db, Duration atLeast) throws InterruptedException {
    if (VendorSql.maria(db)) {
      Poll.until("a session of " + db.name() + " waiting on a lock for " + atLeast,
          () -> mariaWaiting(db, "%", atLeast.toNanos() / 1_000) > 0);
      return;
    }
    Poll.until("a session of " + db.name() + " waiting on a lock for " + atLeast, () -> db.count(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.datname = current_database()"
            + " AND NOT l.granted AND l.waitstart <= clock_timestamp() - ? * interval '1 microsecond'",
        atLeast.toNanos() / 1_000) > 0);
  }

  /** MariaDB: one connection per test database, to read InnoDB's status; closed with the database. */
  private static final java.util.Map<TestDatabase, javax.sql.DataSource> STATUS =
      java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());
  private static final java.util.regex.Pattern THREAD = java.util.regex.Pattern.compile("MariaDB thread id (\\d+)");
  private static final java.util.regex.Pattern WAITED = java.util.regex.Pattern.compile("TRX HAS BEEN WAITING (\\d+) us");

  /**
   * MariaDB: the sessions (connection ids) whose transaction InnoDB's status lists in LOCK WAIT,
   * each with the microseconds it has waited for its lock, on any database.
   */
  private static java.util.Map<Long, Long> mariaWaits(TestDatabase db) {
    String status;
    try (Connection c = STATUS.computeIfAbsent(db, d -> d.dataSource(1)).getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SHOW ENGINE INNODB STATUS")) {
      rs.next();
      status = rs.getString("Status");
    } catch (SQLException e) {
      throw new IllegalStateException("could not read InnoDB's status", e);
    }
    java.util.Map<Long, Long> waits = new java.util.HashMap<>();
    for (String trx : status.split("\n---TRANSACTION ")) {
      if (!trx.contains("\nLOCK WAIT ")) {
        continue;
      }
      java.util.regex.Matcher thread = THREAD.matcher(trx);
      java.util.regex.Matcher waited = WAITED.matcher(trx);
      if (thread.find()) {
        waits.put(Long.parseLong(thread.group(1)), waited.find() ? Long.parseLong(waited.group(1)) : 0L);
      }
    }
    return waits;
  }

  /**
   * MariaDB: how many sessions of {@code db} whose statement is {@code LIKE queryLike} wait on a
   * row lock, having waited at least {@code micros}.
   */
  private static long mariaWaiting(TestDatabase db, String queryLike, long micros) {
    java.util.List<String> ids = new java.util.ArrayList<>();
    mariaWaits(db).forEach((id, waited) -> {
      if (waited >= micros) {
        ids.add(String.valueOf(id));
      }
    });
    return ids.isEmpty() ? 0 : db.count("SELECT count(*) FROM information_schema.processlist WHERE db = database()"
        + " AND info LIKE ? AND id IN (" + String.join(", ", ids) + ")", queryLike);
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
   * {@link #hold(int, Duration)} in {@code db}'s SQL. MariaDB: SQL cannot read InnoDB's lock waits
   * reliably (information_schema.innodb_trx is a cache that misses some), so the statement waits on
   * a user lock ({@code GET_LOCK}) that a gate of this test's takes first and gives up, on a
   * connection of its own, once the holder has waited {@code atLeast} by the server's count
   * (processlist.time_ms) and {@code sessions} sessions wait on a row lock by InnoDB's status. A
   * gate whose condition does not come within {@link Poll#BOUND} ends the holder's statement with
   * KILL QUERY: the call fails, as PostgreSQL's form raises an error after 20 s.
   */
  public static String hold(TestDatabase db, int sessions, Duration atLeast) {
    if (!VendorSql.maria(db)) {
      return hold(sessions, atLeast);
    }
    String lock = HOLD_MARK + "-" + java.util.UUID.randomUUID();
    Connection gate;
    try {
      gate = db.connect();
      try (Statement st = gate.createStatement(); ResultSet rs = st.executeQuery("SELECT GET_LOCK('" + lock + "', 0)")) {
        rs.next();
        if (rs.getInt(1) != 1) {
          throw new IllegalStateException("could not take the user lock " + lock);
        }
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not open the hold's gate", e);
    }
    Thread opener = new Thread(() -> {
      try (gate) {
        long[] holder = new long[1];
        try {
          Poll.until("the holder waiting on " + lock + " for " + atLeast + ", and " + sessions + " session(s) of " + db.name()
              + " waiting on a row lock", () -> {
                holder[0] = db.count("SELECT coalesce(max(id), 0) FROM information_schema.processlist WHERE state = 'User lock'"
                    + " AND info LIKE ? AND id <> CONNECTION_ID()", "%" + lock + "%");
                return holder[0] != 0 && db.count("SELECT count(*) FROM information_schema.processlist WHERE id = ? AND time_ms >= ?",
                    holder[0], atLeast.toMillis()) == 1 && mariaWaiting(db, "%", 0) >= sessions;
              });
        } catch (AssertionError | InterruptedException | RuntimeException e) {
          if (holder[0] != 0) {
            try (Statement st = gate.createStatement()) {
              st.execute("KILL QUERY " + holder[0]); // the hold fails, as PostgreSQL's does
            }
          }
          return;
        }
        try (Statement st = gate.createStatement()) {
          st.execute("DO RELEASE_LOCK('" + lock + "')");
        }
      } catch (SQLException e) {
        // the gate's connection closing gives the lock up too
      }
    }, "idem-test-hold-gate");
    opener.setDaemon(true);
    opener.start();
    return "BEGIN NOT ATOMIC /* " + lock + " */ IF GET_LOCK('" + lock + "', 60) = 1 THEN DO RELEASE_LOCK('" + lock + "');"
        + " ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'held 60 s and fewer than " + sessions
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
