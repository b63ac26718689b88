package dev.idem.testing;

import java.sql.SQLException;
import java.util.regex.Pattern;

/** Argument checks and the short descriptions the report is made of. */
final class Require {
  /** Table, column and schema names the kit puts into SQL: plain identifiers, optionally qualified. */
  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?");

  private Require() {}

  static <T> T present(T value, String name) {
    if (value == null) {
      throw new IllegalArgumentException(name + " is null");
    }
    return value;
  }

  /** {@code n} if it is within {@code low} and {@code high}, both included. */
  static int within(int n, int low, int high, String name) {
    if (n < low || n > high) {
      throw new IllegalArgumentException(name + " must be within " + low + " and " + high + ", was " + n);
    }
    return n;
  }

  /** {@code value} if it is a plain SQL identifier (letters, digits, {@code _}, one {@code .} at most). */
  static String identifier(String value, String name) {
    present(value, name);
    if (!IDENTIFIER.matcher(value).matches()) {
      throw new IllegalArgumentException(name + " '" + value + "' is not a plain SQL identifier: letters, digits and _"
          + " (not starting with a digit), optionally schema-qualified with one '.'");
    }
    return value;
  }

  /** The text cut to {@code max} characters, with an ellipsis if it was longer. */
  static String shorten(String text, int max) {
    return text.length() <= max ? text : text.substring(0, max - 1) + "…";
  }

  /** {@code SQLException: message (SQLState 57P01)}, naming the first SQLState in the causes. */
  static String describe(Throwable e) {
    String message = e.getMessage() == null ? "" : ": " + e.getMessage().replaceAll("\\s+", " ").trim();
    String state = null;
    for (Throwable t = e; t != null && state == null; t = t.getCause()) {
      if (t instanceof SQLException s && s.getSQLState() != null) {
        state = s.getSQLState();
      }
    }
    return shorten(e.getClass().getSimpleName() + message, 110) + (state == null ? "" : " (SQLState " + state + ")");
  }
}
