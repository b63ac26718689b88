package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Arrays;
import org.jooq.BindContext;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.impl.DSL;

/**
 * A claim and the caller's statements sent to PostgreSQL as one string, in one round trip: the
 * claim's plain insert first, then each statement, then a tail ({@code COMMIT}, or the release of a
 * savepoint). PostgreSQL runs them in order and, at the first error, skips everything after it up
 * to the end of the string (pgjdbc sends the whole string with one Sync). So the claim still comes
 * before the effect, as a claim of its own round trip does: a claim that conflicts, or waits for a
 * copy that then commits, fails with a unique violation and the statements never run; a statement
 * that fails leaves the tail unrun. Either way the transaction is left aborted, for the caller to
 * roll back. jOOQ renders and binds the caller's statements (their own types, converters and
 * bindings). Not an API.
 */
public final class Pipelined {
  private Pipelined() {}

  /**
   * Runs {@code claim} (SQL with a {@code ?} for each of {@code claimValues}), then {@code
   * statements}, then {@code tail}, on {@code c}, in one round trip. Each statement is rendered
   * once by {@code dsl} and its values bound by jOOQ's own bindings, in the order it rendered them.
   *
   * @throws ClaimTaken if the claim conflicted on {@code schema.table} (the key or id has a row:
   *     committed, or committed while the claim waited for it), or the transaction failed with
   *     40001 or 40P01 (at REPEATABLE READ or SERIALIZABLE the claim waited for another copy's
   *     row, or the statements raced another transaction). Either way nothing of this string
   *     counts; the caller rolls back and makes the call again with the claim in a round trip of
   *     its own, which reads the row, waits for it, or re-runs as the failure calls for.
   * @throws SQLException whatever else failed (a statement, the tail, or the claim's wait)
   */
  public static void run(Connection c, DSLContext dsl, String claim, Object[] claimValues, Query[] statements,
      String tail, String schema, String table) throws SQLException {
    try {
      send(c, dsl, claim, claimValues, statements, tail);
    } catch (SQLException e) {
      if (SqlStates.isUniqueViolationOn(e, schema, table) || SqlStates.isRetryable(e)) {
        throw new ClaimTaken();
      }
      throw e;
    }
  }

  /** Runs {@code statements} on {@code c} in one round trip, each in turn; the first failure ends it. */
  public static void run(Connection c, DSLContext dsl, Query[] statements) throws SQLException {
    send(c, dsl, null, null, statements, null);
  }

  private static void send(Connection c, DSLContext dsl, String claim, Object[] claimValues, Query[] statements,
      String tail) throws SQLException {
    // Rendered and bound directly rather than as one jOOQ plain-SQL query: jOOQ renders a plain
    // SQL query twice per execution (once to tell its kind), and on a two-core machine that
    // client time cost more than the round trip this saves.
    StringBuilder sql = new StringBuilder(512);
    if (claim != null) {
      sql.append(claim).append(";\n");
    }
    for (Query statement : statements) {
      sql.append(dsl.render(statement)).append(";\n");
    }
    if (tail != null) {
      sql.append(tail);
    }
    try (PreparedStatement ps = c.prepareStatement(sql.toString())) {
      BindContext bind = dsl.bindContext(ps);
      if (claimValues != null) {
        for (Object value : claimValues) {
          bind.bindValue(value, DSL.val(value));
        }
      }
      for (Query statement : statements) {
        bind.visit(statement);
      }
      ps.execute();
    } catch (org.jooq.exception.DataAccessException e) {
      // a value jOOQ could not bind: the caller's statement, before anything was sent
      throw new IllegalArgumentException("statements: could not bind the values of a statement: " + e.getMessage(), e);
    }
  }

  /**
   * Checks the caller's statements: at least one, none null. {@code what} names the argument in
   * the message.
   *
   * @return the statements, copied (so a caller changing its array later changes nothing here)
   */
  public static Query[] checked(Query[] statements, String what) {
    if (statements == null) {
      throw new IllegalArgumentException(what + " must not be null");
    }
    if (statements.length == 0) {
      throw new IllegalArgumentException(what + " must hold at least one statement (the effect)");
    }
    Query[] copy = Arrays.copyOf(statements, statements.length);
    for (int i = 0; i < copy.length; i++) {
      if (copy[i] == null) {
        throw new IllegalArgumentException(what + "[" + i + "] is null");
      }
    }
    return copy;
  }
}
