package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Arrays;
import org.jooq.BindContext;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A claim and the caller's statements sent to PostgreSQL as one string, in one round trip: the
 * claim's plain insert first, then each statement, then a tail ({@code COMMIT}, or the release of a
 * savepoint). PostgreSQL runs them in order and, at the first error, skips everything after it up
 * to the end of the string (pgjdbc sends the whole string with one Sync). So the claim still comes
 * before the effect, as a claim of its own round trip does: a claim that conflicts, or waits for a
 * copy that then commits, fails with a unique violation and the statements never run; a statement
 * that fails leaves the tail unrun. Either way the transaction is left aborted, for the caller to
 * roll back. jOOQ renders and binds the caller's statements (their own types, converters and
 * bindings), all of them before anything is sent: {@link #prepare} refuses a statement jOOQ cannot
 * render or bind while nothing is sent yet, and {@link #send} sends. Not an API.
 */
public final class Pipelined implements AutoCloseable {
  /**
   * Bind values past which the statements are sent with their values inlined: jOOQ does the same
   * for a statement of its own past this many, and pgjdbc refuses a string with more than 65,535,
   * counting every statement's.
   */
  static final int MAX_BIND_VALUES = 32_767;
  /**
   * What ends each statement of the string: a newline first, so a statement ending in a {@code --}
   * comment cannot swallow the semicolon and run into the next one.
   */
  private static final String END = "\n;\n";

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.statements");

  private final PreparedStatement ps;

  private Pipelined(PreparedStatement ps) {
    this.ps = ps;
  }

  /**
   * Renders and binds, on {@code c}, {@code claim} (SQL with a {@code ?} for each of {@code
   * claimValues}; or null), then {@code statements}, then {@code tail} (or null), and sends
   * nothing. Each statement is rendered once by {@code dsl} and its values bound by jOOQ's own
   * bindings, in the order it rendered them.
   *
   * @throws IllegalArgumentException if jOOQ could not render or bind a statement: nothing was
   *     sent, so there is nothing to undo
   * @throws SQLException if the connection could not make a statement
   */
  public static Pipelined prepare(Connection c, DSLContext dsl, String claim, Object[] claimValues, Query[] statements,
      String tail) throws SQLException {
    String[] rendered = new String[statements.length];
    int length = 0;
    for (int i = 0; i < statements.length; i++) {
      rendered[i] = render(dsl, statements[i], false);
      length += rendered[i].length();
    }
    // Each bind value is at least one character of the SQL, so only a long string can hold too
    // many; only then are they counted (a second walk over the statements).
    if (length > MAX_BIND_VALUES && bindValues(dsl, claimValues, statements) > MAX_BIND_VALUES) {
      for (int i = 0; i < statements.length; i++) {
        rendered[i] = render(dsl, statements[i], true);
      }
      return prepare(c, dsl, claim, claimValues, statements, rendered, tail, false);
    }
    return prepare(c, dsl, claim, claimValues, statements, rendered, tail, true);
  }

  private static int bindValues(DSLContext dsl, Object[] claimValues, Query[] statements) {
    int n = claimValues == null ? 0 : claimValues.length;
    for (Query statement : statements) {
      n += dsl.extractBindValues(statement).size();
    }
    return n;
  }

  /** The string of {@code rendered} statements, prepared; their values bound if {@code bindStatements}. */
  private static Pipelined prepare(Connection c, DSLContext dsl, String claim, Object[] claimValues, Query[] statements,
      String[] rendered, String tail, boolean bindStatements) throws SQLException {
    StringBuilder sql = new StringBuilder(512);
    if (claim != null) {
      sql.append(claim).append(END);
    }
    for (String statement : rendered) {
      sql.append(statement).append(END);
    }
    if (tail != null) {
      sql.append(tail);
    }
    PreparedStatement ps = c.prepareStatement(sql.toString());
    try {
      // jOOQ 3.19 marks bindContext deprecated (for removal) and internal, yet it is the one way to
      // bind a query's values into a statement of one's own with jOOQ's bindings (converters,
      // JSONB, arrays), in the order jOOQ renders them. jOOQ 3.20 needs Java 21; when idem moves
      // to it, this is the line to replace, and StatementEffectTest's typed values will tell.
      BindContext bind = dsl.bindContext(ps);
      if (claimValues != null) {
        for (Object value : claimValues) {
          // idem's own values (text, bytes, numbers) are set as jOOQ's bindings would set them,
          // without a jOOQ value and a look-up of its binding for each on every call
          if (value instanceof String text) {
            ps.setString(bind.nextIndex(), text);
          } else if (value instanceof byte[] bytes) {
            ps.setBytes(bind.nextIndex(), bytes);
          } else if (value instanceof Long number) {
            ps.setLong(bind.nextIndex(), number);
          } else {
            bind.bindValue(value, DSL.val(value));
          }
        }
      }
      if (bindStatements) {
        for (Query statement : statements) {
          bind.visit(statement);
        }
      }
      return new Pipelined(ps);
    } catch (SQLException e) {
      try {
        ps.close();
      } catch (SQLException closing) {
        e.addSuppressed(closing);
      }
      throw e;
    } catch (RuntimeException e) {
      try {
        ps.close();
      } catch (SQLException closing) {
        e.addSuppressed(closing);
      }
      // jOOQ reports a value it cannot bind as a DataAccessException, though nothing was sent
      throw new IllegalArgumentException("statements: jOOQ could not bind the values of a statement: " + e.getMessage(), e);
    }
  }

  private static String render(DSLContext dsl, Query statement, boolean inlined) {
    try {
      return inlined ? dsl.renderInlined(statement) : dsl.render(statement);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("statements: jOOQ could not render " + statement.getClass().getName() + ": " + e.getMessage(), e);
    }
  }

  /** Sends the string, in one round trip; the first statement that fails ends it, and is thrown. */
  public void send() throws SQLException {
    ps.execute();
  }

  /**
   * {@link #send}, and the string's first result if it is a result set (else null), open until
   * this is closed.
   */
  public java.sql.ResultSet sendForFirstResult() throws SQLException {
    return ps.execute() ? ps.getResultSet() : null;
  }

  /** Runs {@code statements} on {@code c} in one round trip, each in turn; the first failure ends it. */
  public static void run(Connection c, DSLContext dsl, Query[] statements) throws SQLException {
    if (dsl.family() == org.jooq.SQLDialect.MARIADB || dsl.family() == org.jooq.SQLDialect.MYSQL) {
      // One by one: a string of several statements needs the driver's allowMultiQueries, which a
      // user's MariaDB DataSource rarely sets.
      for (Query statement : statements) {
        try (Pipelined p = prepare(c, dsl, null, null, new Query[] {statement}, null)) {
          p.ps.execute();
        }
      }
      return;
    }
    try (Pipelined p = prepare(c, dsl, null, null, statements, null)) {
      p.ps.execute();
    }
  }

  /**
   * Each of {@code statements} rendered, bound and prepared on {@code c} on its own (as {@link #run}
   * sends them on MariaDB), sending nothing; run them in order with {@link #send}, and close them.
   *
   * @throws IllegalArgumentException if jOOQ could not render or bind one: nothing was sent, and
   *     what was prepared is closed
   */
  public static java.util.List<Pipelined> prepareEach(Connection c, DSLContext dsl, Query[] statements) throws SQLException {
    java.util.List<Pipelined> prepared = new java.util.ArrayList<>(statements.length);
    try {
      for (Query statement : statements) {
        prepared.add(prepare(c, dsl, null, null, new Query[] {statement}, null));
      }
      return prepared;
    } catch (SQLException | RuntimeException e) {
      prepared.forEach(Pipelined::close);
      throw e;
    }
  }

  /**
   * Closes the statement. A failure to close is logged, never thrown: it comes after the string's
   * outcome (possibly its COMMIT), which it must not replace; the pool finds a broken connection
   * on its own.
   */
  @Override
  public void close() {
    try {
      ps.close();
    } catch (SQLException | RuntimeException e) {
      LOG.warn("could not close a statement string after it ran; its outcome stands", e);
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
