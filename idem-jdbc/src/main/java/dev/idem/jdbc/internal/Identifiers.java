package dev.idem.jdbc.internal;

import java.util.regex.Pattern;
import org.jooq.Name;
import org.jooq.impl.DSL;

/**
 * Checks SQL identifiers that come from configuration (schema, table and column names), so no name
 * can carry SQL. idem quotes every name it renders as well; this check makes a bad name fail early
 * with a message instead of late with a syntax error. Not an API.
 */
public final class Identifiers {
  private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

  private Identifiers() {}

  /**
   * @return {@code name}, if it is 1 to 63 letters, digits or underscores, not starting with a digit
   * @throws IllegalArgumentException naming {@code what} otherwise
   */
  public static String check(String what, String name) {
    if (name == null) {
      throw new IllegalArgumentException(what + " must not be null");
    }
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          what + " '" + name + "' is not a plain SQL identifier: use 1 to 63 letters, digits or"
              + " underscores, not starting with a digit");
    }
    return name;
  }

  /**
   * A table of the user's, {@code "orders"} or {@code "shop.orders"}, each part checked by {@link
   * #check}, as a name jOOQ renders quoted.
   *
   * @throws IllegalArgumentException if {@code table} is null, has more than two parts, or a part
   *     is not a plain identifier
   */
  public static Name table(String table) {
    if (table == null) {
      throw new IllegalArgumentException("table must not be null");
    }
    String[] parts = table.split("\\.", -1);
    if (parts.length > 2) {
      throw new IllegalArgumentException("table '" + table + "' must be a name or schema.name");
    }
    return parts.length == 2
        ? DSL.name(check("schema of table", parts[0]), check("table", parts[1]))
        : DSL.name(check("table", parts[0]));
  }
}
