package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;

/**
 * A statement on one of the user's own tables, rendered once by jOOQ for one database, with its
 * bind parameters named, executed as a plain JDBC {@link PreparedStatement}. Names go through
 * jOOQ's quoting for that database (double quotes on PostgreSQL, backticks on MariaDB); values only
 * ever travel as binds. Not an API.
 *
 * @param dialect the database it was rendered for, which also decides how strings are bound
 */
public record Rendered(String sql, List<String> params, Dialect dialect) {

  /**
   * One renderer per database, for statements on the user's tables: their names as given, without
   * idem's schema mapping (which is for idem's own tables).
   */
  private static final Map<Dialect, DSLContext> USER_TABLES = renderers();

  private static Map<Dialect, DSLContext> renderers() {
    Map<Dialect, DSLContext> byDialect = new EnumMap<>(Dialect.class);
    for (Dialect d : Dialect.values()) {
      byDialect.put(d, DSL.using(d.jooq(), new Settings().withExecuteLogging(false).withRenderSchema(true)));
    }
    return Collections.unmodifiableMap(byDialect);
  }

  /** The renderer of statements on the user's tables for {@code dialect}, for building queries. */
  public static DSLContext userTables(Dialect dialect) {
    return USER_TABLES.get(dialect);
  }

  /**
   * Renders {@code query} for {@code dialect}; every non-inline parameter must be named and used once.
   */
  public static Rendered render(Dialect dialect, Query query) {
    String sql = userTables(dialect).render(query);
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
    return new Rendered(sql, names, dialect);
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
        bind(ps, i + 1, values.get(name), dialect);
      }
      return ps;
    } catch (SQLException | RuntimeException e) {
      ps.close();
      throw e;
    }
  }

  /**
   * On PostgreSQL strings travel untyped so that the server infers the column's type: the same
   * call works on a text, varchar, enum or uuid column. MariaDB converts a string to the column's
   * type itself (its ENUM, UUID and number columns take strings), so there a string is a plain
   * string. Everything else goes through the driver's own mapping.
   */
  private static void bind(PreparedStatement ps, int index, Object value, Dialect dialect) throws SQLException {
    if (value == null) {
      ps.setNull(index, Types.NULL);
    } else if (value instanceof String s) {
      if (dialect == Dialect.POSTGRES) {
        ps.setObject(index, s, Types.OTHER);
      } else {
        ps.setString(index, s);
      }
    } else {
      ps.setObject(index, value);
    }
  }
}
