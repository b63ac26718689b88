package dev.idem.jdbc.internal.claim;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.SQLDialect;

/**
 * One or more statements rendered once by jOOQ, with {@code ?} placeholders whose parameters are
 * named when rendered and bound by name, so the order of the {@code ?} never has to be counted by
 * hand. Each of its parts is what a caller addresses by index ({@link #resultAt}, {@link
 * ClaimTable#row}).
 *
 * <p>On PostgreSQL every part is one statement, and the parts go to the server as a single JDBC
 * string in one round trip (pgjdbc runs every statement of the string, parameters included, before
 * its one Sync). On MariaDB a string of several statements needs the driver's {@code
 * allowMultiQueries}, which a user's DataSource rarely sets, so the statements go one by one
 * ({@link #oneByOne}), and a part may be several statements ({@link #firstOf}): the first of them
 * that gives a row is the part's answer, and the rest of that part is skipped.
 *
 * <p>Immutable. The string and the parameter names are worked out once, when it is made: they are
 * asked for on every call of a guard, and building them each time cost a StringBuilder and a list
 * per statement sent.
 */
public final class Sql {
  // jOOQ renders named parameters as :name. The only other colons in idem's statements are
  // PostgreSQL casts (::bigint), which the look-behind skips; no string literal holds a colon.
  private static final Pattern NAMED = Pattern.compile("(?<![:\\w]):(\\w+)");

  /** The parts, in order; each a list of statements. */
  private final List<List<Statement>> parts;
  /** Whether the statements are sent one by one (MariaDB) rather than as one string. */
  private final boolean oneByOne;
  /** The one string, or null where the statements are sent one by one and are more than one. */
  private final String text;
  /** Every placeholder's parameter name, in order. */
  private final String[] names;

  /**
   * One statement with {@code ?} placeholders and the parameter name of each, in order.
   *
   * @param onlyIfChanged run only if the statement before it in its part changed a row (its update
   *     count, as the driver reports it): how a part on MariaDB, which has no {@code UPDATE ..
   *     RETURNING}, reads back the row an update of it changed
   */
  public record Statement(String text, List<String> names, boolean onlyIfChanged) {
    public Statement {
      names = List.copyOf(names);
    }

    /** This statement, run only if the one before it in its part changed a row. */
    public Statement ifChanged() {
      return new Statement(text, names, true);
    }
  }

  /** One part of statements sent one by one (MariaDB), as {@link #firstOf}. */
  static Sql part(Statement... statements) {
    return new Sql(List.of(List.of(statements)), true);
  }

  /**
   * @param parts the parts, in order; each a list of statements
   * @param oneByOne whether the statements are sent one by one (MariaDB) rather than as one string
   */
  public Sql(List<List<Statement>> parts, boolean oneByOne) {
    this.parts = parts.stream().map(List::copyOf).toList();
    this.oneByOne = oneByOne;
    StringBuilder text = new StringBuilder();
    List<String> names = new ArrayList<>();
    int count = 0;
    for (List<Statement> part : this.parts) {
      for (Statement st : part) {
        if (text.length() > 0) {
          text.append(";\n");
        }
        text.append(st.text);
        names.addAll(st.names);
        count++;
      }
    }
    this.text = oneByOne && count > 1 ? null : text.toString();
    this.names = names.toArray(new String[0]);
  }

  public List<List<Statement>> parts() {
    return parts;
  }

  public boolean oneByOne() {
    return oneByOne;
  }

  /** The SQL as one string (PostgreSQL's form; on MariaDB only for a single statement). */
  public String text() {
    if (text == null) {
      throw new IllegalStateException("statements sent one by one have no single string");
    }
    return text;
  }

  /** Every placeholder's parameter name, in order. */
  public List<String> names() {
    return List.of(names);
  }

  /** The statements of {@code parts}, in order, as one. */
  public static Sql join(Sql... parts) {
    List<List<Statement>> all = new ArrayList<>();
    boolean oneByOne = false;
    for (Sql part : parts) {
      all.addAll(part.parts);
      oneByOne |= part.oneByOne;
    }
    return new Sql(all, oneByOne);
  }

  /** Each of {@code statements} a part of its own. */
  public static Sql of(DSLContext dsl, Query... statements) {
    List<List<Statement>> parts = new ArrayList<>();
    for (Query statement : statements) {
      parts.add(List.of(statement(dsl.renderNamedParams(statement))));
    }
    return new Sql(parts, oneByOne(dsl));
  }

  /**
   * One part made of {@code statements} (MariaDB): they run in order until one gives a row, which
   * is the part's answer; a statement that gives no result set (an update) never ends the part.
   */
  public static Sql firstOf(DSLContext dsl, Query... statements) {
    List<Statement> part = new ArrayList<>();
    for (Query statement : statements) {
      part.add(statement(dsl.renderNamedParams(statement)));
    }
    return new Sql(List.of(part), oneByOne(dsl));
  }

  private static boolean oneByOne(DSLContext dsl) {
    return dsl.family() == SQLDialect.MARIADB || dsl.family() == SQLDialect.MYSQL;
  }

  /** A statement from SQL with {@code :name} parameters. */
  static Statement statement(String named) {
    List<String> names = new ArrayList<>();
    Matcher m = NAMED.matcher(named);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      if (Character.isDigit(m.group(1).charAt(0))) {
        // an unnamed bind value: every value idem sends is named, the rest is inlined
        throw new IllegalStateException("unnamed parameter " + m.group() + " in " + named);
      }
      names.add(m.group(1));
      m.appendReplacement(out, "?");
    }
    m.appendTail(out);
    return new Statement(out.toString(), names, false);
  }

  /** Prepares the string and binds each placeholder to {@code values.apply(name)}. */
  public PreparedStatement prepare(Connection c, Function<String, Object> values) throws SQLException {
    return prepare(c, text(), names, values);
  }

  private static PreparedStatement prepare(Connection c, String text, List<String> names, Function<String, Object> values)
      throws SQLException {
    return prepare(c, text, names.toArray(new String[0]), values);
  }

  private static PreparedStatement prepare(Connection c, String text, String[] names, Function<String, Object> values)
      throws SQLException {
    PreparedStatement ps = c.prepareStatement(text);
    try {
      for (int i = 0; i < names.length; i++) {
        Object v = values.apply(names[i]);
        if (v == null) {
          ps.setNull(i + 1, Types.BINARY);
        } else if (v instanceof byte[] bytes) {
          ps.setBytes(i + 1, bytes);
        } else if (v instanceof Long l) {
          ps.setLong(i + 1, l);
        } else if (v instanceof String s) {
          ps.setString(i + 1, s);
        } else if (v instanceof java.time.LocalDateTime time) {
          ps.setObject(i + 1, time); // MariaDB: a DATETIME holding UTC (DbTime)
        } else if (v instanceof String[] texts) {
          ps.setArray(i + 1, c.createArrayOf("text", texts));
        } else {
          throw new IllegalStateException("no binding for parameter " + names[i] + " of type " + v.getClass());
        }
      }
      return ps;
    } catch (SQLException | RuntimeException e) {
      ps.close();
      throw e;
    }
  }

  /** The value of each placeholder, in order: {@code values.apply(name)}. */
  public Object[] values(Function<String, Object> values) {
    Object[] out = new Object[names.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.apply(names[i]);
    }
    return out;
  }

  /** Reads a result set; null stands for "no answer" (no row). */
  @FunctionalInterface
  public interface Reader<R> {
    R read(ResultSet rs) throws SQLException;
  }

  /**
   * Runs every part in order and returns what {@code reader} read from part {@code index}'s
   * result (null if it gave none, or {@code index} is negative).
   */
  public <R> R run(Connection c, Function<String, Object> values, int index, Reader<R> reader) throws SQLException {
    if (!oneByOne) {
      try (PreparedStatement ps = prepare(c, values)) {
        if (index < 0) {
          ps.execute();
          return null;
        }
        try (ResultSet rs = resultAt(ps, index)) {
          return reader.read(rs);
        }
      }
    }
    R answer = null;
    for (int i = 0; i < parts.size(); i++) {
      int changed = 0;
      for (Statement st : parts.get(i)) {
        if (st.onlyIfChanged && changed <= 0) {
          changed = 0;
          continue;
        }
        try (PreparedStatement ps = prepare(c, st.text, st.names, values)) {
          boolean isResultSet = ps.execute();
          changed = isResultSet ? 0 : ps.getUpdateCount();
          if (i == index && isResultSet) {
            try (ResultSet rs = ps.getResultSet()) {
              answer = reader.read(rs);
            }
            if (answer != null) {
              break; // the part has its answer: the rest of it is not run
            }
          }
        }
      }
    }
    return answer;
  }

  /**
   * Runs the prepared string and moves to its {@code index}-th result (0-based, counting every
   * statement), which must be a result set.
   */
  public static ResultSet resultAt(PreparedStatement ps, int index) throws SQLException {
    boolean isResultSet = ps.execute();
    for (int i = 0; i < index; i++) {
      isResultSet = ps.getMoreResults();
    }
    if (!isResultSet) {
      throw new IllegalStateException("statement " + index + " of the batch returned no rows");
    }
    return ps.getResultSet();
  }
}
