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
 * releases them. A connection in auto-commit is refused with an {@link IllegalStateException}
 * before idem writes anything.
 *
 * <p>The other way round, {@link #ownTransaction}: when idem runs your code in a transaction of its
 * own (no transaction open on the thread), the binding may lend that transaction to the framework,
 * so the framework's data access inside your code writes on idem's connection and commits with the
 * key.
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

  /**
   * Called when idem begins a transaction of its own on {@code connection} to run caller code in it
   * (an executor's local effect, an inbox's effect, {@code Idem.inTransaction}), before that code
   * runs; idem calls the returned {@link Lent} at the transaction's end. Each run of a
   * transaction idem runs again (after 40001, 40P01, 53200) begins anew. Not called for idem's
   * transactions that run none of the caller's code (a statement sent with its claim, a
   * reconciliation). The default lends nothing.
   *
   * <p>An implementation makes {@code connection} the framework's transaction for the duration (so
   * the framework's data access in the caller's code uses it, and its nested transactions take part
   * in it); it must not commit, roll back or close it. If it throws, nothing has run, and idem rolls
   * back and throws that.
   */
  default Lent ownTransaction(Connection connection) {
    return Lent.NOTHING;
  }

  /**
   * The end of a transaction idem owns, as {@link #ownTransaction} lent it. idem calls {@link
   * #beforeCommit()} once the caller's code returned, then commits; {@link #end(Outcome)} always,
   * last, also when the code failed or the commit did.
   */
  interface Lent {
    /** Lends nothing. */
    Lent NOTHING = outcome -> { };

    /** How idem's transaction ended, as far as idem knows. */
    enum Outcome {
      /** The commit succeeded (the work may still have failed after it: it is committed). */
      COMMITTED,
      /** Rolled back, or never committed. */
      ROLLED_BACK,
      /**
       * The connection failed while the commit was on its way: PostgreSQL may or may not have
       * committed. Read the database to know.
       */
      UNKNOWN
    }

    /**
     * Called before idem commits, on the thread that ran the code. Throwing (for example because
     * the framework's transaction was marked rollback-only) makes idem roll back instead, and
     * throw that exception to its caller.
     */
    default void beforeCommit() {}

    /**
     * Called last, whatever happened, with how the transaction ended. Must undo everything {@link
     * TransactionBinding#ownTransaction} did on the thread. A failure here after a commit is
     * logged, never reported as the call's failure (the work is committed).
     */
    void end(Outcome outcome);
  }
}
