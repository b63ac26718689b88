package dev.idem.benchmarks;

import java.io.PrintWriter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.mariadb.jdbc.util.constants.ServerStatus;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;

/**
 * A DataSource over pgjdbc or MariaDB Connector/J whose connections count the round trips they
 * make to the server: each statement executed (pgjdbc sends one with its parameters and a Sync,
 * and waits for the answer, however many statements its string holds; Connector/J sends one
 * statement a trip), and each commit or rollback of a transaction that sent something (neither
 * driver sends anything for one that did not, nor for a COMMIT already sent as SQL: each asks its
 * connection's transaction state, which this reads as they do). On Connector/J a change of
 * auto-commit is a trip of its own too ({@code set autocommit=0}, {@code set autocommit=1}, the
 * latter ending a transaction in the same trip), where pgjdbc begins a transaction with its first
 * statement and sends nothing. What the pool does under it (validation, resets) is not counted:
 * it is the same for every guard.
 */
final class RoundTrips implements DataSource {
  private static final Set<String> EXECUTES = Set.of("execute", "executeQuery", "executeUpdate", "executeLargeUpdate",
      "executeBatch", "executeLargeBatch");

  private final DataSource pool;
  private final AtomicLong count = new AtomicLong();

  RoundTrips(DataSource pool) {
    this.pool = pool;
  }

  long count() {
    return count.get();
  }

  @Override
  public Connection getConnection() throws SQLException {
    Connection c = pool.getConnection();
    BaseConnection pg = c.isWrapperFor(BaseConnection.class) ? c.unwrap(BaseConnection.class) : null;
    org.mariadb.jdbc.Connection maria = pg == null ? c.unwrap(org.mariadb.jdbc.Connection.class) : null;
    return proxy(Connection.class, c, (proxy, m, args) -> {
      String name = m.getName();
      if (pg != null) {
        boolean ends = name.equals("commit")
            || (name.equals("rollback") && (args == null || args.length == 0))
            || (name.equals("setAutoCommit") && (Boolean) args[0]);
        if (ends && pg.getTransactionState() != TransactionState.IDLE) {
          count.incrementAndGet();
        }
      } else if (name.equals("setAutoCommit")) {
        if ((Boolean) args[0] != maria.getAutoCommit()) {
          count.incrementAndGet(); // "set autocommit=n", which also ends a transaction open
        }
      } else if (name.equals("commit") || (name.equals("rollback") && (args == null || args.length == 0))) {
        if ((maria.getContext().getServerStatus() & ServerStatus.IN_TRANSACTION) != 0) {
          count.incrementAndGet();
        }
      }
      Object result = invoke(m, c, args);
      if (result instanceof CallableStatement s) {
        return statement(CallableStatement.class, s);
      }
      if (result instanceof PreparedStatement s) {
        return statement(PreparedStatement.class, s);
      }
      if (result instanceof Statement s) {
        return statement(Statement.class, s);
      }
      return result;
    });
  }

  private <S extends Statement> S statement(Class<S> type, S s) {
    return proxy(type, s, (proxy, m, args) -> {
      if (EXECUTES.contains(m.getName())) {
        count.incrementAndGet();
      }
      return invoke(m, s, args);
    });
  }

  private static <T> T proxy(Class<T> type, T target, InvocationHandler handler) {
    return type.cast(Proxy.newProxyInstance(RoundTrips.class.getClassLoader(), new Class<?>[] {type}, handler));
  }

  private static Object invoke(Method m, Object target, Object[] args) throws Throwable {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @Override
  public Connection getConnection(String user, String password) throws SQLException {
    return getConnection();
  }

  @Override
  public PrintWriter getLogWriter() throws SQLException {
    return pool.getLogWriter();
  }

  @Override
  public void setLogWriter(PrintWriter out) throws SQLException {
    pool.setLogWriter(out);
  }

  @Override
  public void setLoginTimeout(int seconds) throws SQLException {
    pool.setLoginTimeout(seconds);
  }

  @Override
  public int getLoginTimeout() throws SQLException {
    return pool.getLoginTimeout();
  }

  @Override
  public Logger getParentLogger() throws SQLFeatureNotSupportedException {
    return pool.getParentLogger();
  }

  @Override
  public <T> T unwrap(Class<T> iface) throws SQLException {
    return pool.unwrap(iface);
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) throws SQLException {
    return pool.isWrapperFor(iface);
  }
}
