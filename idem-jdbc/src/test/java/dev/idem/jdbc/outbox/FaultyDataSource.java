package dev.idem.jdbc.outbox;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/**
 * A real pool's {@link DataSource} whose connections and statements fail the calls a {@link Fault}
 * picks, everything else passing through to the real connection: for the relay's paths that only
 * a broken connection or driver reaches. The database is real; only the chosen calls fail.
 */
final class FaultyDataSource {
  /** The failure for a call, or null to let it through. */
  @FunctionalInterface
  interface Fault {
    SQLException on(String method, Object[] args);
  }

  private FaultyDataSource() {}

  static DataSource wrap(DataSource real, Fault fault) {
    return proxy(DataSource.class, real, (method, args) -> null, fault);
  }

  private static <T> T proxy(Class<T> type, Object target, Fault ownFault, Fault fault) {
    InvocationHandler h = (p, method, args) -> {
      SQLException failure = ownFault.on(method.getName(), args == null ? new Object[0] : args);
      if (failure != null) {
        throw failure;
      }
      Object result;
      try {
        result = method.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
      // connections and statements made here fail as told, too
      if (result instanceof Connection c && method.getReturnType() == Connection.class) {
        return proxy(Connection.class, c, fault, fault);
      }
      if (result instanceof Statement s && method.getReturnType() == Statement.class) {
        return proxy(Statement.class, s, fault, fault);
      }
      return result;
    };
    return type.cast(Proxy.newProxyInstance(FaultyDataSource.class.getClassLoader(), new Class<?>[] {type}, h));
  }
}
