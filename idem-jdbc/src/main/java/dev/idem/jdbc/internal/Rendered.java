package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.Param;
import org.jooq.Query;
import org.jooq.SQLDialect;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;

/**
 * A statement on one of the user's own tables, rendered once by jOOQ, with its bind parameters
 * named, executed as a plain JDBC {@link PreparedStatement}. Names go through jOOQ's quoting; values
 * only ever travel as binds. Not an API.
 */
public record Rendered(String sql, List<String> params) {

  /**
   * Renders statements on the user's tables: their names as given, without idem's schema mapping
   * (which is for idem's own tables).
   */
  public static final DSLContext USER_TABLES =
      DSL.using(SQLDialect.POSTGRES, new Settings().withExecuteLogging(false).withRenderSchema(true));

  /** Renders {@code query}; every non-inline parameter must be named and used once. */
  public static Rendered render(DSLContext dsl, Query query) {
    String sql = dsl.render(query);
    List<String> names = query.getParams().entrySet().stream()
        .filter(e -> !e.getValue().isInline())
        .map(Map.Entry::getKey)
        .toList();
    long markers = sql.chars().filter(ch -> ch == '?').count();
    // Identifiers are checked to be letters, digits and underscores, so every '?' is a bind marker;
    // a mismatch means a parameter name was used twice and the binds would shift.
    if (markers != names.size()) {
      throw new IllegalStateException("rendered " + markers + " bind markers for parameters " + names + ": " + sql);
    }
    return new Rendered(sql, names);
  }

  /** Prepares the statement on {@code c} and binds {@code values} by parameter name. */
  public PreparedStatement prepare(Connection c, Map<String, ?> values) throws SQLException {
    PreparedStatement ps = c.prepareStatement(sql);
    try {
      for (int i = 0; i < params.size(); i++) {
        String name = params.get(i);
        if (!values.containsKey(name)) {
          throw new IllegalStateException("no value for parameter " + name + " of " + sql);
        }
        bind(ps, i + 1, values.get(name));
      }
      return ps;
    } catch (SQLException | RuntimeException e) {
      ps.close();
      throw e;
    }
  }

  /**
   * Strings travel untyped so that PostgreSQL infers the column's type: the same call works on a
   * text, varchar, enum or uuid column. Everything else goes through the driver's own mapping.
   */
  public static void bind(PreparedStatement ps, int index, Object value) throws SQLException {
    if (value == null) {
      ps.setNull(index, Types.NULL);
    } else if (value instanceof String s) {
      ps.setObject(index, s, Types.OTHER);
    } else {
      ps.setObject(index, value);
    }
  }
}
