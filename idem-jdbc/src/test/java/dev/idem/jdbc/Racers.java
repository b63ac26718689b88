package dev.idem.jdbc;

import dev.idem.testing.Proxies;
import dev.idem.testing.TestDatabase;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import javax.sql.DataSource;

/**
 * Pools for copies racing on real connections, each copy on a connection of its own from the
 * start, so that they reach a lock together rather than one by one as a pool opens connections
 * (about 40 ms each on a small machine, longer than any race). Opening connections is most of what
 * such a race costs: a class's tests share one opened pool per size, whatever isolation each
 * race runs at.
 *
 * <p>Public for idem-jdbc's test packages only (it is test code, not an API).
 */
public final class Racers {
  /** Opened pools per database and size; each is closed with its database. */
  private static final Map<TestDatabase, Map<Integer, DataSource>> OPENED = Collections.synchronizedMap(new WeakHashMap<>());

  private Racers() {}

  /**
   * A pool of {@code size} connections to {@code db}, all open, whose transactions run at {@code
   * isolation} (a {@link Connection} constant's name, e.g. {@code "TRANSACTION_SERIALIZABLE"}): set
   * on each connection as it is handed out, and put back by the pool when it is returned. Shared
   * by the tests of the class; do not close it (the database does).
   */
  public static DataSource pool(TestDatabase db, int size, String isolation) throws SQLException {
    int level;
    try {
      level = Connection.class.getField(isolation).getInt(null);
    } catch (ReflectiveOperationException e) {
      throw new IllegalArgumentException("not a Connection isolation constant: " + isolation, e);
    }
    DataSource pool;
    synchronized (OPENED) {
      Map<Integer, DataSource> bySize = OPENED.computeIfAbsent(db, d -> new HashMap<>());
      pool = bySize.get(size);
      if (pool == null) {
        pool = opened(db.dataSource(size), size);
        bySize.put(size, pool);
      }
    }
    DataSource shared = pool;
    return (DataSource) Proxy.newProxyInstance(Racers.class.getClassLoader(), new Class<?>[] {DataSource.class},
        (proxy, method, args) -> {
          Object result = Proxies.invoke(method, shared, args);
          if (result instanceof Connection c) {
            c.setTransactionIsolation(level);
          }
          return result;
        });
  }

  /** {@code pool} with {@code connections} of its connections opened: borrowed at once, then given back. */
  public static <T extends DataSource> T opened(T pool, int connections) throws SQLException {
    List<Connection> held = new ArrayList<>();
    try {
      for (int i = 0; i < connections; i++) {
        held.add(pool.getConnection());
      }
    } finally {
      for (Connection c : held) {
        c.close();
      }
    }
    return pool;
  }
}
