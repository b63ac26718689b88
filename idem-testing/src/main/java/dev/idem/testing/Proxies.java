package dev.idem.testing;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/** For tests that stand a proxy in front of a JDBC object to make it fail at a chosen moment. */
public final class Proxies {
  private Proxies() {}

  /** Calls {@code method} on {@code target}, throwing what it threw rather than a reflection wrapper. */
  public static Object invoke(Method method, Object target, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
