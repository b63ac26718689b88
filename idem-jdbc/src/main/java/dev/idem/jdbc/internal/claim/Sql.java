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

/**
 * One or more statements rendered once by jOOQ into a single JDBC string with {@code ?}
 * placeholders, sent to the server in one round trip (pgjdbc runs every statement of the string,
 * parameters included, before its one Sync). Parameters are named when rendered and bound by name,
 * so the order of the {@code ?} never has to be counted by hand.
 *
 * @param text the SQL with {@code ?} placeholders
 * @param names the parameter name of each placeholder, in order
 */
public record Sql(String text, List<String> names) {
  // jOOQ renders named parameters as :name. The only other colons in idem's statements are
  // PostgreSQL casts (::bigint), which the look-behind skips; no string literal holds a colon.
  private static final Pattern NAMED = Pattern.compile("(?<![:\\w]):(\\w+)");

  public Sql {
    names = List.copyOf(names);
  }

  /** The statements of {@code parts}, in order, as one string. */
  public static Sql join(Sql... parts) {
    StringBuilder text = new StringBuilder();
    List<String> names = new ArrayList<>();
    for (Sql part : parts) {
      if (text.length() > 0) {
        text.append(";\n");
      }
      text.append(part.text);
      names.addAll(part.names);
    }
    return new Sql(text.toString(), names);
  }

  public static Sql of(DSLContext dsl, Query... statements) {
    StringBuilder text = new StringBuilder();
    List<String> names = new ArrayList<>();
    for (Query statement : statements) {
      String named = dsl.renderNamedParams(statement);
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
      if (text.length() > 0) {
        text.append(";\n");
      }
      text.append(out);
    }
    return new Sql(text.toString(), names);
  }

  /** Prepares the string and binds each placeholder to {@code values.apply(name)}. */
  public PreparedStatement prepare(Connection c, Function<String, Object> values) throws SQLException {
    PreparedStatement ps = c.prepareStatement(text);
    try {
      for (int i = 0; i < names.size(); i++) {
        Object v = values.apply(names.get(i));
        if (v == null) {
          ps.setNull(i + 1, Types.BINARY);
        } else if (v instanceof byte[] bytes) {
          ps.setBytes(i + 1, bytes);
        } else if (v instanceof Long l) {
          ps.setLong(i + 1, l);
        } else if (v instanceof String s) {
          ps.setString(i + 1, s);
        } else if (v instanceof String[] texts) {
          ps.setArray(i + 1, c.createArrayOf("text", texts));
        } else {
          throw new IllegalStateException("no binding for parameter " + names.get(i) + " of type " + v.getClass());
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
    Object[] out = new Object[names.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.apply(names.get(i));
    }
    return out;
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
