package dev.idem.jdbc.tx;

import java.sql.Connection;

/**
 * How idem finds the transaction a framework has open on this thread, so that idem's calls join it
 * on its connection instead of committing on a connection of their own. A framework supplies one
 * ({@code Idem.builder(dataSource).transactionBinding(...)}); a Spring starter would install one.
 *
 * <p>idem's own {@code Idem.inTransaction} is always looked at first; this binding is asked only
 * when no idem transaction is open on this thread. Without a binding idem never guesses: a call
 * with no idem transaction open runs in a transaction of its own.
 *
 * <p>Guarantee the implementation must give: the connection returned is the one the framework's
 * own data access (JdbcTemplate, jOOQ, an ORM's flush) uses for the same transaction, with
 * auto-commit off. idem never commits, rolls back or closes it; it sets savepoints on it and
 * releases them.
 */
@FunctionalInterface
public interface TransactionBinding {

  /** No framework: idem's calls join only {@code Idem.inTransaction}. */
  TransactionBinding NONE = () -> null;

  /**
   * The connection of the transaction open on this thread, or null if none is open. Must not open
   * a transaction or borrow a connection that is not already bound to this thread.
   */
  Connection currentConnection();
}
