package dev.idem.jdbc.tx;

import java.sql.Connection;
import org.jooq.DSLContext;

/**
 * An open transaction: its JDBC connection and a jOOQ {@link DSLContext} bound to it. Everything
 * done through either commits or rolls back together with idem's own rows (a claimed key, an inbox
 * row, an outbox message).
 *
 * <p>Do not commit, roll back or close the connection yourself: idem owns the transaction's end
 * (or the caller who opened it does, when idem joined it).
 */
public interface Tx {

  /** The transaction's connection. */
  Connection connection();

  /** A jOOQ context on the transaction's connection, with idem's schema mapping. */
  DSLContext dsl();
}
