package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;
import org.postgresql.jdbc.AutoSave;

/**
 * What pgjdbc (and, for an open transaction, MariaDB Connector/J) knows of a connection, asked
 * without a round trip. A connection that cannot be
 * unwrapped to pgjdbc's (a wrapper that hides it) answers false: idem then acts as it would on a
 * connection in the default state. Not an API.
 */
public final class Driver {
  private Driver() {}

  /**
   * True if pgjdbc reports the connection's transaction aborted: a statement failed and its error
   * was caught, so PostgreSQL ignores everything until the rollback (a COMMIT then rolls back).
   * pgjdbc tracks this from the server's answers. False for a connection that is not pgjdbc's
   * underneath: such a driver reports a failed commit itself or not at all.
   */
  public static boolean aborted(Connection c) {
    try {
      return c.isWrapperFor(BaseConnection.class)
          && c.unwrap(BaseConnection.class).getTransactionState() == TransactionState.FAILED;
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }

  /**
   * Refuses a caller's transaction a joined call cannot work in, before it sends anything: one that
   * is {@link #aborted} (nothing would run there, and a rollback to a savepoint's name after the
   * savepoint itself failed could find an outer call's savepoint of that name and undo its work),
   * or one whose driver loses the savepoints idem sets there ({@link #losesSavepoints}). {@code
   * what} names the call's key or message in the message.
   *
   * @throws IllegalArgumentException naming {@code callerTx} and what is wrong with it
   */
  public static void refuseUnjoinable(Connection callerTx, String what) {
    if (aborted(callerTx)) {
      throw new IllegalArgumentException("callerTx: its transaction is aborted (a statement in it failed and its error"
          + " was caught); roll it back: nothing of " + what + " was sent");
    }
    if (losesSavepoints(callerTx)) {
      throw new IllegalArgumentException("callerTx: " + org.postgresql.Driver.getVersion() + " with autosave=always"
          + " drops the savepoints idem sets in your transaction (released with its own, fixed in 42.7.10), so a failed "
          + what + " could not be undone apart from your work: use pgjdbc 42.7.10 or later (under Spring Boot 3.5 set"
          + " the Maven property postgresql.version), or autosave=never or conservative; nothing was sent");
    }
  }

  /**
   * True if the connection is pgjdbc's before 42.7.10 with {@code autosave=always}: that driver
   * releases a savepoint set inside a statement together with its own after the statement (with
   * {@code cleanupSavepoints}), or rolls it back with a failed string, so idem could not roll back
   * to it. Asked without a round trip.
   */
  public static boolean losesSavepoints(Connection c) {
    try {
      return c.isWrapperFor(BaseConnection.class)
          && c.unwrap(BaseConnection.class).getQueryExecutor().getAutoSave() == AutoSave.ALWAYS
          && OLD_AUTOSAVE;
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }

  /** Whether the pgjdbc on the class path is older than 42.7.10 (read from the driver, not compiled in). */
  private static final boolean OLD_AUTOSAVE = olderThan(org.postgresql.Driver.getVersion(), 42, 7, 10);

  static boolean olderThan(String version, int... than) {
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+)\\.(\\d+)\\.(\\d+)").matcher(version);
    if (!m.find()) {
      return false;
    }
    for (int i = 0; i < 3; i++) {
      int part = Integer.parseInt(m.group(i + 1));
      if (part != than[i]) {
        return part < than[i];
      }
    }
    return false;
  }

  /**
   * Runs {@code sql}, a savepoint command, without pgjdbc's {@code autosave} wrapping it: on an
   * aborted transaction autosave would first set a savepoint of its own, which PostgreSQL refuses
   * there, and the rollback to idem's savepoint would never be sent (pgjdbc 42.7.8, the version
   * Spring Boot 3.5 manages). Through the statement API when the connection is not pgjdbc's.
   */
  public static void savepointCommand(Connection c, String sql) throws SQLException {
    if (c.isWrapperFor(BaseConnection.class)) {
      c.unwrap(BaseConnection.class).execSQLUpdate(sql); // no autosave savepoint in an aborted transaction
      return;
    }
    try (Statement st = c.createStatement()) {
      // one by one: another driver (MariaDB's) may refuse several statements in one string
      for (String command : sql.split(";\n")) {
        st.execute(command);
      }
    } catch (SQLException e) {
      throw orRolledBack(c, e);
    }
  }

  /**
   * {@code e}, or, if it is MariaDB's "SAVEPOINT does not exist" for a savepoint idem set, the
   * {@link #rolledBack} error it shows: the server rolled the transaction back since.
   */
  public static SQLException orRolledBack(Connection c, SQLException e) {
    return SqlStates.isSavepointGone(e) ? rolledBack(c, "a savepoint idem set in it is gone", e) : e;
  }

  /**
   * MariaDB: transactions the server rolled back whole under idem's calls (a deadlock), by
   * connection, with what showed it. InnoDB then runs the next statements in a new transaction,
   * which must not be committed as if it were the one rolled back: {@link OwnTransaction} refuses
   * to commit a transaction of idem's own marked here, and forgets the mark when it ends.
   */
  private static final java.util.Map<Connection, SQLException> ROLLED_BACK =
      java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

  /**
   * Marks {@code c}'s transaction as rolled back by the server ({@code how}, {@code cause}) and
   * returns the error that says so: SQLSTATE 40001, so that a transaction of idem's own is run
   * again from the start under the retry budget.
   */
  public static SQLException rolledBack(Connection c, String how, Throwable cause) {
    SQLException e = new java.sql.SQLTransactionRollbackException("the database rolled back the whole transaction"
        + " (MariaDB does on a deadlock, savepoints and all), so nothing done in it before is kept, and what ran"
        + " after began a new one; roll the transaction back and run it again (" + how + ": " + cause.getMessage() + ")",
        SqlStates.SERIALIZATION_FAILURE, cause);
    ROLLED_BACK.put(c, e);
    return e;
  }

  /** What showed that the server rolled back {@code c}'s transaction under idem's calls ({@link #rolledBack}), or null. */
  public static SQLException rolledBackBy(Connection c) {
    return ROLLED_BACK.get(c);
  }

  /** Forgets {@link #rolledBack}'s mark on {@code c}: its transaction ended. */
  static void forgetRolledBack(Connection c) {
    ROLLED_BACK.remove(c);
  }

  /** True if the connection is pgjdbc's underneath (a wrapper that hides it: false). */
  static boolean postgres(Connection c) {
    try {
      return c.isWrapperFor(BaseConnection.class);
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }

  /**
   * True if pgjdbc reports a transaction open (or aborted) on a connection a {@code DataSource} just
   * handed out: the DataSource gives out the thread's current transaction (Spring's {@code
   * TransactionAwareDataSourceProxy}, say), and a transaction idem began and committed there would
   * commit the caller's work with it. MariaDB Connector/J: the server's in-transaction flag, as its
   * last answer carried it, asked again where it is set ({@link MariaDbStatus#inTransaction}).
   * False when it cannot tell (neither driver underneath).
   */
  public static boolean inTransaction(Connection c) {
    try {
      if (c.isWrapperFor(BaseConnection.class)) {
        return c.unwrap(BaseConnection.class).getTransactionState() != TransactionState.IDLE;
      }
      return MariaDbStatus.inTransaction(c);
    } catch (SQLException | RuntimeException | LinkageError e) {
      return false;
    }
  }

  /**
   * MariaDB Connector/J's view of the server's status flags, which the server sends with every
   * answer: whether a transaction is open (SERVER_STATUS_IN_TRANS), asked without a round trip.
   * Reached by reflection: the driver is the user's, not a dependency of idem's.
   */
  private static final class MariaDbStatus {
    /** SERVER_STATUS_IN_TRANS, the protocol's flag (org.mariadb.jdbc.util.constants.ServerStatus.IN_TRANSACTION). */
    private static final int IN_TRANSACTION = 1;
    private static final Class<?> CONNECTION;
    private static final java.lang.reflect.Method CONTEXT;
    private static final java.lang.reflect.Method STATUS;

    static {
      Class<?> connection = null;
      java.lang.reflect.Method context = null;
      java.lang.reflect.Method status = null;
      try {
        connection = Class.forName("org.mariadb.jdbc.Connection", false, Driver.class.getClassLoader());
        context = connection.getMethod("getContext");
        status = Class.forName("org.mariadb.jdbc.client.Context", false, Driver.class.getClassLoader()).getMethod("getServerStatus");
      } catch (ReflectiveOperationException | LinkageError absent) {
        connection = null; // no MariaDB driver here (or another version's): such a connection answers false
      }
      CONNECTION = connection;
      CONTEXT = context;
      STATUS = status;
    }

    /**
     * True if {@code c} is MariaDB Connector/J's underneath and the server said a transaction is
     * open. Connector/J sets the flag itself on every error (so that a rollback is sent), also in
     * auto-commit, where the server has ended the failed statement's transaction: a pooled
     * connection whose last statement failed (a duplicate key the application caught) would read
     * as the caller's open transaction, and be refused. So a set flag is asked again of the server,
     * by a statement that touches no table and opens no transaction ({@code DO 0}), whose answer
     * carries the server's own flag: one round trip, only where the flag is set.
     */
    static boolean inTransaction(Connection c) throws SQLException {
      if (CONNECTION == null || !c.isWrapperFor(CONNECTION)) {
        return false;
      }
      Object driver = c.unwrap(CONNECTION);
      if (!flagged(driver)) {
        return false;
      }
      try (Statement st = c.createStatement()) {
        st.execute("DO 0");
      } catch (SQLException e) {
        return true; // it cannot tell: taken as open, refused, never committed behind the caller's back
      }
      return flagged(driver);
    }

    private static boolean flagged(Object driver) {
      try {
        return (((Number) STATUS.invoke(CONTEXT.invoke(driver))).intValue() & IN_TRANSACTION) != 0;
      } catch (ReflectiveOperationException e) {
        return false;
      }
    }
  }
}
