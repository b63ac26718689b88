package dev.idem.testing;

import java.io.PrintWriter;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import javax.sql.DataSource;

/**
 * Your service's {@link DataSource}, wrapped so that {@link Repeats} can kill a transaction as it
 * commits ({@link Delivery#KILLED_BEFORE_COMMIT}, {@link Delivery#KILLED_AFTER_COMMIT}): give the
 * service this instead of its pool, and give it to {@link Repeats#faults}.
 *
 * <p><b>Unarmed</b> (whenever no killing trial runs) it passes every call through to the target:
 * connections and statements are {@link Proxy proxies} that read one volatile field per call and
 * do nothing else; {@code unwrap} and {@code isWrapperFor} reach the target's objects (so a
 * framework that unwraps to the driver's connection still finds it, and bypasses this).
 *
 * <p><b>Armed</b>, it watches the service's <i>writing commits</i>: a {@code commit()} (or {@code
 * setAutoCommit(true)}) ending a transaction that wrote, asked of the database before the commit
 * (PostgreSQL: {@code txid_current_if_assigned()}, an id assigned; MariaDB and MySQL: the
 * session's rows written, its {@code Handler_write}, {@code _update} and {@code _delete} counters,
 * grew since the transaction began, counted from the first transaction begun while armed); a statement run in auto-commit mode that wrote (the
 * kit runs it in a transaction of its own to ask, then commits it); and a statement string ending
 * in {@code COMMIT} (idem's one-round-trip form), counted as writing. To kill one, it reads the
 * victim's server-side id (PostgreSQL: {@code pg_backend_pid()}; MariaDB: {@code
 * CONNECTION_ID()}), kills it from a separate connection taken from the target before arming
 * (PostgreSQL: {@code pg_terminate_backend}, which must return true; MariaDB: {@code KILL
 * CONNECTION}), and waits (at most 10 s) until the id is gone from {@code pg_stat_activity} or
 * {@code information_schema.processlist}: before the commit, which then fails in the service as a
 * dead connection does, nothing committed; or right after a successful commit, after which the
 * service's call fails with the driver's own error for the dead connection, the outcome unknown to
 * it.
 *
 * <p>Not seen: work done on a connection unwrapped to the driver's, on a connection not taken from
 * this data source, or by another thread of the service that commits at the same moment (a relay,
 * a scheduler): run killing trials with those quiet, or on another pool.
 */
public final class FaultyDataSource implements DataSource {
  /** How long a killed connection may take to leave pg_stat_activity (processlist on MariaDB). */
  static final Duration GONE_WITHIN = Duration.ofSeconds(10);

  private final DataSource target;
  private final AtomicInteger connections = new AtomicInteger();
  /** Null: pass everything through. */
  private volatile Watch watch;

  private FaultyDataSource(DataSource target) {
    this.target = target;
  }

  /** {@code target} (your pool), wrapped; unarmed until a killing trial of {@link Repeats} runs. */
  public static FaultyDataSource wrap(DataSource target) {
    Require.present(target, "target");
    if (target instanceof FaultyDataSource) {
      throw new IllegalArgumentException("target is a FaultyDataSource already; wrap the pool itself");
    }
    return new FaultyDataSource(target);
  }

  /** The data source wrapped. */
  public DataSource target() {
    return target;
  }

  /**
   * Starts watching the writing commits of every connection of this data source, counting them,
   * and kills the {@code killAt}-th (from 1; 0: none) before or after it commits. One watch at a
   * time.
   */
  synchronized Watch watch(int killAt, boolean afterCommit) throws SQLException {
    if (watch != null) {
      throw new IllegalStateException("this FaultyDataSource is watched by another trial already");
    }
    Connection killer = null;
    if (killAt > 0) {
      // Taken before the watch starts, from the target: it is never watched, and it is there even
      // when the service holds every other connection of the pool at the commit.
      killer = target.getConnection();
      killer.setAutoCommit(true);
    }
    Watch w = new Watch(killAt, afterCommit, killer);
    watch = w;
    return w;
  }

  /** Stops {@code w} and closes its killing connection. */
  synchronized void stop(Watch w) {
    if (watch == w) {
      watch = null;
    }
    if (w.killer != null) {
      try {
        w.killer.close();
      } catch (SQLException ignored) {
        // the pool gets it back or drops it; nothing of the trial depends on it now
      }
    }
  }

  /** One killing trial's view of the service's writing commits. */
  static final class Watch {
    final int killAt;
    final boolean afterCommit;
    final Connection killer;
    final AtomicInteger writing = new AtomicInteger();
    /** Each writing commit, in order: what it was. */
    final List<String> commits = new CopyOnWriteArrayList<>();
    /** What the kill did, once it fired; or why it could not. */
    volatile String kill;
    volatile boolean killed;

    Watch(int killAt, boolean afterCommit, Connection killer) {
      this.killAt = killAt;
      this.afterCommit = afterCommit;
      this.killer = killer;
    }
  }

  @Override
  public Connection getConnection() throws SQLException {
    return wrapped(target.getConnection());
  }

  @Override
  public Connection getConnection(String username, String password) throws SQLException {
    return wrapped(target.getConnection(username, password));
  }

  private Connection wrapped(Connection real) {
    Watched handler = new Watched(real, connections.incrementAndGet());
    if (watch != null) {
      handler.transactionStarts(); // armed: a MariaDB connection's writes are counted from here
    }
    Connection proxy = (Connection) Proxy.newProxyInstance(FaultyDataSource.class.getClassLoader(),
        new Class<?>[] {Connection.class}, handler);
    handler.proxy = proxy;
    return proxy;
  }

  @Override
  public PrintWriter getLogWriter() throws SQLException {
    return target.getLogWriter();
  }

  @Override
  public void setLogWriter(PrintWriter out) throws SQLException {
    target.setLogWriter(out);
  }

  @Override
  public void setLoginTimeout(int seconds) throws SQLException {
    target.setLoginTimeout(seconds);
  }

  @Override
  public int getLoginTimeout() throws SQLException {
    return target.getLoginTimeout();
  }

  @Override
  public Logger getParentLogger() throws SQLFeatureNotSupportedException {
    return target.getParentLogger();
  }

  @Override
  public <T> T unwrap(Class<T> iface) throws SQLException {
    return iface.isInstance(this) ? iface.cast(this) : target.unwrap(iface);
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) throws SQLException {
    return iface.isInstance(this) || target.isWrapperFor(iface);
  }

  @Override
  public String toString() {
    return "FaultyDataSource over " + target;
  }

  /** {@code equals}, {@code hashCode} and {@code toString} of a proxy: its own identity, not its target's. */
  private static Object objectMethod(Object self, String name, Object[] args, String description) {
    return switch (name) {
      case "equals" -> self == args[0];
      case "hashCode" -> System.identityHashCode(self);
      default -> description;
    };
  }

  /** A call to pass on once the commit point is decided. */
  @FunctionalInterface
  private interface Call {
    Object run() throws Throwable;
  }

  /** One connection taken from this data source. */
  private final class Watched implements java.lang.reflect.InvocationHandler {
    final Connection real;
    final int number;
    Connection proxy;
    /** Null until first asked: whether the connection is PostgreSQL's (else MariaDB's or MySQL's). */
    private Boolean postgresql;
    /**
     * MariaDB: the session's count of rows written when its open transaction began, read while
     * armed; -1 when unknown (the connection was taken before the watch and began no transaction
     * since).
     */
    private long writesBefore = -1;

    Watched(Connection real, int number) {
      this.real = real;
      this.number = number;
    }

    @Override
    public Object invoke(Object self, Method m, Object[] args) throws Throwable {
      String name = m.getName();
      if (m.getDeclaringClass() == Object.class) {
        return objectMethod(self, name, args, "FaultyDataSource connection #" + number + " over " + real);
      }
      Watch w = watch;
      switch (name) {
        case "commit":
          if (w != null && !real.getAutoCommit()) {
            commitPoint(w, "commit() on connection #" + number, () -> {
              real.commit();
              return null;
            }, null);
            transactionStarts();
            return null;
          }
          break;
        case "rollback":
          if (w != null && (args == null || args.length == 0)) {
            real.rollback();
            transactionStarts();
            return null;
          }
          break;
        case "setAutoCommit":
          if (w != null && Boolean.TRUE.equals(args[0]) && !real.getAutoCommit()) {
            return commitPoint(w, "setAutoCommit(true) on connection #" + number, () -> {
              real.setAutoCommit(true);
              return null;
            }, null);
          }
          if (w != null && Boolean.FALSE.equals(args[0]) && real.getAutoCommit()) {
            real.setAutoCommit(false);
            transactionStarts();
            return null;
          }
          break;
        case "createStatement":
        case "prepareStatement":
        case "prepareCall":
          Statement statement = (Statement) Proxies.invoke(m, real, args);
          String sql = name.equals("createStatement") ? null : (String) args[0];
          return Proxy.newProxyInstance(FaultyDataSource.class.getClassLoader(), new Class<?>[] {m.getReturnType()},
              new WatchedStatement(statement, this, sql));
        default:
          break;
      }
      return Proxies.invoke(m, real, args);
    }

    /** A statement about to run: a commit point if it commits, or if it writes in auto-commit. */
    Object statement(Watch w, String sql, Statement statement, Call call) throws Throwable {
      if (sql == null) {
        return call.run();
      }
      boolean autoCommit = real.getAutoCommit();
      if (SqlText.endsInCommit(sql)) {
        if (SqlText.onlyCommit(sql)) {
          // COMMIT alone: it wrote if its transaction did; in auto-commit there is nothing to commit.
          return autoCommit ? call.run() : commitPoint(w, "COMMIT on connection #" + number, call, null);
        }
        // Statements and their COMMIT in one string: what they write cannot be asked in between.
        Object result = commitPoint(w, "'" + SqlText.snippet(sql) + "' ending in COMMIT on connection #" + number, call, true);
        transactionStarts();
        return result;
      }
      if (!autoCommit || !SqlText.fitsInATransaction(sql) || statement.getFetchSize() > 0) {
        return call.run();
      }
      // Auto-commit: run it in a transaction of its own, so that the database tells whether it wrote
      // and its commit is a point a kill can be aimed at. A statement alone in auto-commit is a
      // transaction of its own anyway.
      transactionStarts();
      real.setAutoCommit(false);
      Object result;
      try {
        result = call.run();
      } catch (Throwable t) {
        restore(t, true);
        throw t;
      }
      try {
        commitPoint(w, "auto-commit '" + SqlText.snippet(sql) + "' on connection #" + number, () -> {
          real.commit();
          return null;
        }, null);
      } catch (Throwable t) {
        restore(t, false);
        throw t;
      }
      real.setAutoCommit(true);
      return result;
    }

    private void restore(Throwable failure, boolean rollback) {
      try {
        if (rollback) {
          real.rollback();
        }
        real.setAutoCommit(true);
      } catch (SQLException | RuntimeException e) {
        failure.addSuppressed(e);
      }
    }

    /**
     * A commit about to happen: counted if it writes ({@code writing}, or asked when null), and
     * the one the watch aims at is killed before or after it.
     */
    private Object commitPoint(Watch w, String what, Call commit, Boolean writing) throws Throwable {
      if (!(writing != null ? writing : wrote())) {
        return commit.run();
      }
      int n = w.writing.incrementAndGet();
      w.commits.add(what);
      if (n != w.killAt) {
        return commit.run();
      }
      int pid = pid();
      if (!w.afterCommit) {
        terminate(w, pid, "before it reached the server");
        return commit.run(); // fails: its backend is gone, nothing of it committed
      }
      Object result;
      try {
        result = commit.run();
      } catch (Throwable t) {
        w.kill = "writing commit " + n + " failed by itself (" + Require.describe(t) + "), so it was not killed";
        throw t;
      }
      if (terminate(w, pid, "after it committed")) {
        throw deadConnection();
      }
      return result;
    }

    /** PostgreSQL, or (false) MariaDB or MySQL, as the driver names the product: told without a round trip. */
    private boolean postgresql() throws SQLException {
      if (postgresql == null) {
        postgresql = "PostgreSQL".equalsIgnoreCase(real.getMetaData().getDatabaseProductName());
      }
      return postgresql;
    }

    /**
     * Whether the transaction open on this connection has written. PostgreSQL: it was assigned an
     * id. MariaDB: the session's rows written (Handler_write, _update and _delete, which leave out
     * internal temporary tables and updates that changed nothing) grew since the transaction
     * began; when that is unknown, counted as writing, since a writing commit missed would be a
     * kill never tried. (Not information_schema.innodb_trx: InnoDB refreshes it at most every
     * 100 ms, so it may not show the last write.)
     */
    private boolean wrote() {
      try {
        if (postgresql()) {
          try (Statement st = real.createStatement(); ResultSet rs = st.executeQuery("SELECT txid_current_if_assigned() IS NOT NULL")) {
            rs.next();
            return rs.getBoolean(1);
          }
        }
        return writesBefore < 0 || rowsWritten() > writesBefore;
      } catch (SQLException e) {
        return false; // an aborted transaction: its commit rolls back, nothing is written
      }
    }

    /** Armed, a transaction begins (or may, in auto-commit): on MariaDB its writes are counted from here. */
    void transactionStarts() {
      try {
        writesBefore = postgresql() ? -1 : rowsWritten();
      } catch (SQLException e) {
        writesBefore = -1; // unknown: its commit is counted as writing
      }
    }

    /** MariaDB: the rows this session has written to tables, ever. */
    private long rowsWritten() throws SQLException {
      try (Statement st = real.createStatement(); ResultSet rs = st.executeQuery("SELECT SUM(variable_value) FROM"
          + " information_schema.session_status WHERE variable_name IN ('HANDLER_WRITE', 'HANDLER_UPDATE', 'HANDLER_DELETE')")) {
        rs.next();
        return rs.getLong(1);
      }
    }

    private int pid() throws SQLException {
      try (Statement st = real.createStatement(); ResultSet rs = st.executeQuery(postgresql() ? "SELECT pg_backend_pid()" : "SELECT CONNECTION_ID()")) {
        rs.next();
        return rs.getInt(1);
      }
    }

    /** Kills connection {@code pid} from the watch's own connection and waits until it is gone. */
    private boolean terminate(Watch w, int pid, String when) {
      String what = "writing commit " + w.killAt + " (" + w.commits.get(w.killAt - 1) + ") killed " + when;
      try {
        boolean pg = postgresql();
        if (pg) {
          boolean signalled;
          try (PreparedStatement ps = w.killer.prepareStatement("SELECT pg_terminate_backend(?)")) {
            ps.setInt(1, pid);
            try (ResultSet rs = ps.executeQuery()) {
              rs.next();
              signalled = rs.getBoolean(1);
            }
          }
          if (!signalled) {
            w.kill = what + " could not be: pg_terminate_backend(" + pid + ") returned false";
            return false;
          }
        } else {
          try (Statement st = w.killer.createStatement()) {
            st.execute("KILL CONNECTION " + pid); // fails (ER_NO_SUCH_THREAD) if there is none to kill
          }
        }
        String list = pg ? "pg_stat_activity" : "information_schema.processlist";
        try (PreparedStatement ps = w.killer.prepareStatement(pg ? "SELECT count(*) FROM pg_stat_activity WHERE pid = ?"
            : "SELECT count(*) FROM information_schema.processlist WHERE id = ?")) {
          ps.setInt(1, pid);
          boolean gone = Poll.within(GONE_WITHIN, Duration.ofMillis(2), () -> {
            try (ResultSet rs = ps.executeQuery()) {
              rs.next();
              return rs.getLong(1) == 0;
            }
          });
          if (!gone) {
            w.kill = what + ": " + (pg ? "backend " : "connection ") + pid + " signalled but still in " + list + " after "
                + GONE_WITHIN.toSeconds() + " s";
            return false;
          }
        }
        w.kill = what + (pg ? " (backend " + pid + " terminated)" : " (connection " + pid + " killed)");
        w.killed = true;
        return true;
      } catch (SQLException e) {
        w.kill = what + " could not be: " + Require.describe(e);
        return false;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        w.kill = what + " could not be confirmed: interrupted";
        return false;
      }
    }

    /** What the driver says when this dead connection is used: what the service sees. */
    private SQLException deadConnection() {
      try (Statement st = real.createStatement()) {
        st.execute("SELECT 1");
      } catch (SQLException e) {
        return e;
      }
      return new SQLException("connection #" + number + " was terminated right after its commit", "08006");
    }
  }

  /** A statement of a watched connection. */
  private final class WatchedStatement implements java.lang.reflect.InvocationHandler {
    private final Statement real;
    private final Watched connection;
    private final String prepared;
    /** The SQL of {@code addBatch(String)}, for the report of a batch's commit. */
    private final List<String> batch = new ArrayList<>();

    WatchedStatement(Statement real, Watched connection, String prepared) {
      this.real = real;
      this.connection = connection;
      this.prepared = prepared;
    }

    @Override
    public Object invoke(Object self, Method m, Object[] args) throws Throwable {
      String name = m.getName();
      if (m.getDeclaringClass() == Object.class) {
        return objectMethod(self, name, args, "FaultyDataSource statement over " + real);
      }
      switch (name) {
        case "getConnection":
          return connection.proxy;
        case "addBatch":
          if (args != null && args.length == 1 && args[0] instanceof String sql) {
            batch.add(sql);
          }
          break;
        case "clearBatch":
          batch.clear();
          break;
        default:
          if (name.startsWith("execute")) {
            Watch w = watch;
            boolean isBatch = name.endsWith("Batch");
            try {
              if (w == null) {
                return Proxies.invoke(m, real, args);
              }
              String sql = args != null && args.length > 0 && args[0] instanceof String s ? s
                  : prepared != null ? prepared : String.join(";\n", batch);
              return connection.statement(w, sql, real, () -> Proxies.invoke(m, real, args));
            } finally {
              if (isBatch) {
                batch.clear();
              }
            }
          }
      }
      return Proxies.invoke(m, real, args);
    }
  }
}
