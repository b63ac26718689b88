package dev.idem.jdbc.internal;

import dev.idem.jdbc.tx.Tx;
import java.sql.Connection;
import org.jooq.DSLContext;

/**
 * A transaction on a connection: idem's own, the caller's, or a framework's. Its jOOQ context is
 * made when first asked for: most of idem's transactions (its claims, a callback on the JDBC
 * connection) never use one. Not an API.
 */
final class JoinedTx implements Tx {
  private final Context context;
  private final Connection connection;
  private DSLContext dsl;

  JoinedTx(Context context, Connection connection) {
    this.context = context;
    this.connection = connection;
  }

  @Override
  public Connection connection() {
    return connection;
  }

  @Override
  public DSLContext dsl() {
    DSLContext d = dsl;
    if (d == null) {
      dsl = d = context.dsl(connection);
    }
    return d;
  }
}
