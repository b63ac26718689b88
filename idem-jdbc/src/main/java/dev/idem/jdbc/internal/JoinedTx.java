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
  /** How idem's own transaction ends; null for a transaction idem does not end. */
  private final OwnTransaction.Ending ending;
  private DSLContext dsl;

  JoinedTx(Context context, Connection connection, OwnTransaction.Ending ending) {
    this.context = context;
    this.connection = connection;
    this.ending = ending;
  }

  /** The binding's veto before idem commits this transaction (see {@link Context#beforeCommit}). */
  void beforeCommit() {
    if (ending != null) {
      ending.beforeCommit();
    }
  }

  /** The statement that ends this transaction in {@code COMMIT} succeeded (see {@link Context#committed}). */
  void committed() {
    if (ending != null) {
      ending.committed();
    }
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
