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
 * setAutoCommit(true)}) ending a transaction in which PostgreSQL assigned a transaction id (it
 * wrote), asked with {@code txid_current_if_assigned()} before the commit; a statement run in
 * auto-commit mode that wrote (the kit runs it in a transaction of its own to ask, then commits
 * it); and a statement string ending in {@code COMMIT} (idem's one-round-trip form), counted as
 * writing. To kill one, it reads the victim's backend pid ({@code pg_backend_pid()}), terminates
 * it from a separate connection taken from the target before arming ({@code
 * pg_terminate_backend}, which must return true), and waits (at most 10 s) until the pid is gone
 * from {@code pg_stat_activity}: before the commit, which then fails in the service as a dead
 * connection does, nothing committed; or right after a successful commit, after which the
 * service's call fails with the driver's own error for the dead connection, the outcome unknown to
 * it.
 *
 * <p>Not seen: work done on a connection unwrapped to the driver's, on a connection not taken from
 * this data source, or by another thread of the service that commits at the same moment (a relay,
 * a scheduler): run killing trials with those quiet, or on another pool.
 */
public final class FaultyDataSource implements DataSource {
  /** How long a terminated backend may take to leave pg_stat_activity. */
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
            return commitPoint(w, "commit() on connection #" + number, () -> {
              real.commit();
              return null;
            }, null);
          }
          break;
        case "setAutoCommit":
          if (w != null && Boolean.TRUE.equals(args[0]) && !real.getAutoCommit()) {
            return commitPoint(w, "setAutoCommit(true) on connection #" + number, () -> {
              real.setAutoCommit(true);
              return null;
            }, null);
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
        return commitPoint(w, "'" + SqlText.snippet(sql) + "' ending in COMMIT on connection #" + number, call, true);
      }
      if (!autoCommit || !SqlText.fitsInATransaction(sql) || statement.getFetchSize() > 0) {
        return call.run();
      }
      // Auto-commit: run it in a transaction of its own, so that PostgreSQL tells whether it wrote
      // and its commit is a point a kill can be aimed at. A statement alone in auto-commit is a
      // transaction of its own anyway.
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

    /** Whether the transaction open on this connection has written: PostgreSQL assigned it an id. */
    private boolean wrote() {
      try (Statement st = real.createStatement(); ResultSet rs = st.executeQuery("SELECT txid_current_if_assigned() IS NOT NULL")) {
        rs.next();
        return rs.getBoolean(1);
      } catch (SQLException e) {
        return false; // an aborted transaction: its commit rolls back, nothing is written
      }
    }

    private int pid() throws SQLException {
      try (Statement st = real.createStatement(); ResultSet rs = st.executeQuery("SELECT pg_backend_pid()")) {
        rs.next();
        return rs.getInt(1);
      }
    }

    /** Terminates backend {@code pid} from the watch's own connection and waits until it is gone. */
    private boolean terminate(Watch w, int pid, String when) {
      String what = "writing commit " + w.killAt + " (" + w.commits.get(w.killAt - 1) + ") killed " + when;
      try {
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
        try (PreparedStatement ps = w.killer.prepareStatement("SELECT count(*) FROM pg_stat_activity WHERE pid = ?")) {
          ps.setInt(1, pid);
          boolean gone = Poll.within(GONE_WITHIN, Duration.ofMillis(2), () -> {
            try (ResultSet rs = ps.executeQuery()) {
              rs.next();
              return rs.getLong(1) == 0;
            }
          });
          if (!gone) {
            w.kill = what + ": backend " + pid + " signalled but still in pg_stat_activity after " + GONE_WITHIN.toSeconds() + " s";
            return false;
          }
        }
        w.kill = what + " (backend " + pid + " terminated)";
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
