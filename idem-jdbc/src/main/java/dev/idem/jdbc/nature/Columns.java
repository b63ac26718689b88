package dev.idem.jdbc.nature;

import dev.idem.jdbc.internal.Identifiers;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jooq.Condition;
import org.jooq.Field;
import org.jooq.impl.DSL;

/**
 * The key columns of one of the user's tables, checked once, and the binds of one call's values
 * for them ({@code k0}, {@code k1}, ... in the configured order).
 */
final class Columns {
  final List<String> names;
  final List<Field<Object>> fields;

  private Columns(List<String> names) {
    this.names = List.copyOf(names);
    this.fields = names.stream().map(n -> DSL.field(DSL.name(n))).toList();
  }

  /**
   * @throws IllegalArgumentException if there are none, one is not a plain identifier, or one is
   *     named twice
   */
  static Columns of(String what, String... names) {
    if (names == null || names.length == 0) {
      throw new IllegalArgumentException(what + " must name at least one column");
    }
    Set<String> seen = new LinkedHashSet<>();
    for (String n : names) {
      if (!seen.add(Identifiers.check("column in " + what, n))) {
        throw new IllegalArgumentException(what + " names column " + n + " twice");
      }
    }
    return new Columns(new ArrayList<>(seen));
  }

  /** {@code k0 = :k0 and k1 = :k1 ...}: the row with the call's key. */
  Condition match() {
    Condition c = DSL.noCondition();
    for (int i = 0; i < fields.size(); i++) {
      c = c.and(fields.get(i).eq(DSL.param("k" + i)));
    }
    return c;
  }

  /**
   * The binds of {@code values} for the key columns, checked: every key column has a non-null value.
   *
   * @throws IllegalArgumentException naming the missing column
   */
  Map<String, Object> binds(Map<String, ?> values, String table) {
    if (values == null) {
      throw new IllegalArgumentException("the values must not be null");
    }
    Map<String, Object> binds = new HashMap<>();
    for (int i = 0; i < names.size(); i++) {
      Object v = values.get(names.get(i));
      if (v == null) {
        throw new IllegalArgumentException("no value for key column " + names.get(i) + " of " + table
            + " (a NULL never conflicts, so it would guard nothing)");
      }
      binds.put("k" + i, v);
    }
    return binds;
  }
}
