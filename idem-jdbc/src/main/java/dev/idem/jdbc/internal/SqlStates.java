package dev.idem.jdbc.internal;

import java.sql.SQLException;
import java.util.Set;
import java.util.function.Predicate;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * Classifies PostgreSQL's and MariaDB's errors by SQLSTATE (and, where MariaDB's SQLSTATE is the
 * generic HY000, by its error number), looking through wrapping exceptions. Not an API.
 */
public final class SqlStates {
  public static final String SERIALIZATION_FAILURE = "40001";
  public static final String DEADLOCK_DETECTED = "40P01";
  public static final String UNIQUE_VIOLATION = "23505";
  public static final String LOCK_NOT_AVAILABLE = "55P03";
  public static final String QUERY_CANCELED = "57014";
  /** The server ran out of memory: a new attempt may find it. */
  public static final String OUT_OF_MEMORY = "53200";
  /** idem's own signal, raised by its claim when the key already has a row (see the migrations). */
  public static final String REPEAT = "IDEM1";
  /**
   * The partitioned layout refused a key: it does not begin with a UUIDv7 in lowercase, so it
   * carries no time to file it under (raised by idem_check_key, see migration-partitioned).
   */
  public static final String KEY_WITHOUT_TIME = "IDEM2";
  /** A check violation; a row a partitioned table has no partition for is one too. */
  public static final String CHECK_VIOLATION = "23514";
  /** A statement sent after an earlier one failed: PostgreSQL ignores all until the rollback. */
  public static final String IN_FAILED_SQL_TRANSACTION = "25P02";

  private SqlStates() {}

  /** The first SQLSTATE in {@code t}'s cause chain, or null. */
  public static String of(Throwable t) {
    return firstCause(t, c -> c instanceof SQLException sql && sql.getSQLState() != null) instanceof SQLException sql
        ? sql.getSQLState() : null;
  }

  /** The first of {@code t} and its causes that {@code match} accepts, or null. */
  private static Throwable firstCause(Throwable t, Predicate<Throwable> match) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (match.test(c)) {
        return c;
      }
      if (c.getCause() == c) {
        break;
      }
    }
    return null;
  }

  /** The first PostgreSQL error in {@code t}'s cause chain with SQLSTATE {@code state}, or null. */
  private static PSQLException firstWithState(Throwable t, String state) {
    return (PSQLException) firstCause(t, c -> c instanceof PSQLException p && state.equals(p.getSQLState()));
  }

  /**
   * 40001, 40P01 or 53200, or MariaDB's 1020 (a row changed since the snapshot, which MariaDB 11.6
   * and later raise under REPEATABLE READ with innodb_snapshot_isolation on, its default there):
   * the transaction may succeed if run again from the start. MariaDB's deadlock (1213) is 40001.
   */
  public static boolean isRetryable(Throwable t) {
    String state = of(t);
    return SERIALIZATION_FAILURE.equals(state) || DEADLOCK_DETECTED.equals(state) || OUT_OF_MEMORY.equals(state)
        || errorCode(t) == MARIADB_RECORD_CHANGED;
  }

  /**
   * True if {@code t} is MariaDB's deadlock (1213): InnoDB rolled back the whole transaction, its
   * savepoints with it, and the next statement begins a new one. (PostgreSQL's deadlock aborts the
   * transaction instead, which a rollback to a savepoint takes back.)
   */
  public static boolean isMariaDbDeadlock(Throwable t) {
    return errorCode(t) == MARIADB_DEADLOCK && !(firstCause(t, c -> c instanceof PSQLException) instanceof PSQLException);
  }

  /** MariaDB's ER_LOCK_DEADLOCK (SQLSTATE 40001). */
  private static final int MARIADB_DEADLOCK = 1213;

  /**
   * True if {@code t} is MariaDB's "SAVEPOINT does not exist" (1305) for a savepoint idem set: the
   * server rolled the transaction back since (a deadlock).
   */
  public static boolean isSavepointGone(Throwable t) {
    return errorCode(t) == MARIADB_SAVEPOINT_GONE && !(firstCause(t, c -> c instanceof PSQLException) instanceof PSQLException);
  }

  /** MariaDB's ER_SP_DOES_NOT_EXIST, as a savepoint command raises it. */
  private static final int MARIADB_SAVEPOINT_GONE = 1305;

  /** MariaDB's ER_CHECKREAD, "Record has changed since last read" (SQLSTATE HY000). */
  private static final int MARIADB_RECORD_CHANGED = 1020;

  /** The server ended the connection: see {@link #isConnectionFailure}. */
  private static final Set<String> SERVER_ENDED_CONNECTION = Set.of("57P01", "57P02", "57P03", "57P05");

  /**
   * True if {@code t} says the connection failed (SQLSTATE class 08, or pgjdbc's I/O error with no
   * server answer) or the server ended it (57P01 admin shutdown, as pg_terminate_backend or a
   * shutting-down server does; 57P02 crash shutdown; 57P03 cannot connect now; 57P05 the session
   * sat idle past idle_session_timeout): the statement may or may not have run, and a new
   * connection may succeed.
   */
  public static boolean isConnectionFailure(Throwable t) {
    String state = of(t);
    return state != null && (state.startsWith("08") || SERVER_ENDED_CONNECTION.contains(state))
        || MARIADB_ENDED_CONNECTION.contains(errorCode(t));
  }

  /**
   * MariaDB's errors for a connection the server ended: 1927 (killed, as {@code KILL CONNECTION}
   * does), 1053 (shutting down), 2006 and 2013 (gone away, lost during a query).
   */
  private static final Set<Integer> MARIADB_ENDED_CONNECTION = Set.of(1927, 1053, 2006, 2013);

  /** MariaDB's error for a lock wait past innodb_lock_wait_timeout: the statement, not the transaction, is rolled back. */
  private static final int MARIADB_LOCK_WAIT_TIMEOUT = 1205;

  /** The vendor error code of the first SQL exception in {@code t}'s cause chain, or 0. */
  private static int errorCode(Throwable t) {
    return firstCause(t, c -> c instanceof SQLException sql && sql.getErrorCode() != 0) instanceof SQLException sql
        ? sql.getErrorCode() : 0;
  }

  /**
   * True if {@code t} is MariaDB's lock wait timeout (1205). MariaDB names no table in it: idem
   * counts it as its claim's bounded wait only for a claim statement, the one statement it bounds.
   */
  public static boolean isLockWaitTimeout(Throwable t) {
    return errorCode(t) == MARIADB_LOCK_WAIT_TIMEOUT && !(firstCause(t, c -> c instanceof PSQLException) instanceof PSQLException);
  }

  /**
   * The partitioned layout's refusal of a key, as the bad argument it is (nothing was written), or
   * null if {@code t} is something else: a key with no time in it, or one whose time has no
   * partition (older than the oldest kept, or further ahead than partitions were created).
   */
  public static IllegalArgumentException refusedKey(Throwable t) {
    String state = of(t);
    String message = serverMessage(t);
    if (KEY_WITHOUT_TIME.equals(state)) {
      return new IllegalArgumentException(message, t);
    }
    if (CHECK_VIOLATION.equals(state) && message != null && message.startsWith("no partition of relation")) {
      return new IllegalArgumentException("the key has no partition to be remembered in (" + message + "): the"
          + " partitioned layout files a key under the time in its UUIDv7, and that time is before the oldest"
          + " partition kept or after the newest one created ahead (Operations.maintainPartitions);"
          + " see docs/scale.md", t);
    }
    return null;
  }

  private static String serverMessage(Throwable t) {
    return firstCause(t, c -> c instanceof PSQLException p && p.getServerErrorMessage() != null) instanceof PSQLException p
        ? p.getServerErrorMessage().getMessage() : null;
  }

  public static boolean is(Throwable t, String state) {
    return state.equals(of(t));
  }

  /**
   * True if {@code t} is a lock timeout (55P03) PostgreSQL raised while waiting to insert into
   * {@code relation} (a table or index name, as its error context names it), as opposed to one
   * raised by something else the same statement or commit ran, whose context names that.
   *
   * <p>A lock timeout with no context at all counts as one on {@code relation} too. PostgreSQL
   * raises it so when the timer fires just as a wait ends and the interrupt is served outside the
   * wait (a stress run saw it about once in 1,400 calls, with idem's 1 ms bound on the key's wait).
   * Only the claim waits under idem's bound; the caller's statements wait under the caller's own
   * lock_timeout, off by default. Should a timeout of the caller's ever come without context, the
   * call is answered "in flight", with nothing committed, and a retry sends it again.
   */
  public static boolean isLockTimeoutOn(Throwable t, String relation) {
    PSQLException p = firstWithState(t, LOCK_NOT_AVAILABLE);
    if (p == null) {
      return false;
    }
    ServerErrorMessage m = p.getServerErrorMessage();
    // a partition of the partitioned layout is named after its table: relation_pYYYYMMDD
    return m == null || m.getWhere() == null || m.getWhere().contains("\"" + relation + "\"")
        || m.getWhere().contains("\"" + relation + "_p");
  }

  /**
   * True if {@code t} is a unique violation (23505) on {@code schema.table} itself, as PostgreSQL
   * reports it: a conflict on idem's own claim row, as opposed to one on a table of the caller's
   * that happens to share the SQLSTATE (a deferred constraint checked at the same commit).
   */
  public static boolean isUniqueViolationOn(Throwable t, String schema, String table) {
    PSQLException p = firstWithState(t, UNIQUE_VIOLATION);
    ServerErrorMessage m = p == null ? null : p.getServerErrorMessage();
    return m != null && table.equals(m.getTable()) && schema.equals(m.getSchema());
  }
}
