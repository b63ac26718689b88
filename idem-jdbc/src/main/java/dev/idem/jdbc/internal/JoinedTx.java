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
  /** The {@code beforeCommit} of a transaction idem does not end. */
  static final Runnable NOT_OWNED = () -> { };
  private final Context context;
  private final Connection connection;
  private final Runnable beforeCommit;
  private DSLContext dsl;

  JoinedTx(Context context, Connection connection, Runnable beforeCommit) {
    this.context = context;
    this.connection = connection;
    this.beforeCommit = beforeCommit;
  }

  /** The binding's veto before idem commits this transaction (see {@link Context#beforeCommit}). */
  void beforeCommit() {
    beforeCommit.run();
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
