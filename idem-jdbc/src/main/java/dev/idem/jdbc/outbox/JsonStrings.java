package dev.idem.jdbc.outbox;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * A list of strings as a JSON array, the form MariaDB's outbox keeps a message's header names and
 * values in (PostgreSQL: {@code text[]}), written and read here so no JSON library is needed. The
 * writer escapes what JSON requires (quote, backslash, control characters) and leaves every other
 * character as it is, so a text goes in and comes out intact; the reader takes any JSON array of
 * strings (whitespace, every escape) and refuses anything else.
 */
final class JsonStrings {
  private JsonStrings() {}

  /** {@code strings} as a JSON array, in their order. */
  static String write(Collection<String> strings) {
    StringBuilder json = new StringBuilder(2 + strings.size() * 16).append('[');
    boolean first = true;
    for (String s : strings) {
      if (!first) {
        json.append(',');
      }
      first = false;
      json.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '"' -> json.append("\\\"");
          case '\\' -> json.append("\\\\");
          case '\n' -> json.append("\\n");
          case '\r' -> json.append("\\r");
          case '\t' -> json.append("\\t");
          default -> {
            if (c < 0x20) {
              json.append(String.format("\\u%04x", (int) c));
            } else {
              json.append(c);
            }
          }
        }
      }
      json.append('"');
    }
    return json.append(']').toString();
  }

  /**
   * The strings of the JSON array {@code json}.
   *
   * @throws IllegalStateException naming {@code what} if {@code json} is not an array of strings
   */
  static String[] read(String json, String what) {
    return new Reader(json, what).array();
  }

  private static final class Reader {
    private final String json;
    private final String what;
    private int at;

    Reader(String json, String what) {
      this.json = json;
      this.what = what;
    }

    String[] array() {
      if (json == null) {
        throw bad("is null");
      }
      List<String> out = new ArrayList<>();
      expect('[');
      if (peek() == ']') {
        at++;
      } else {
        while (true) {
          out.add(string());
          char next = next();
          if (next == ']') {
            break;
          }
          if (next != ',') {
            throw bad("has '" + next + "' where ',' or ']' belongs");
          }
        }
      }
      if (peek() != 0) {
        throw bad("goes on after its closing ']'");
      }
      return out.toArray(new String[0]);
    }

    private String string() {
      expect('"');
      StringBuilder s = new StringBuilder();
      while (true) {
        if (at >= json.length()) {
          throw bad("ends inside a string");
        }
        char c = json.charAt(at++);
        if (c == '"') {
          return s.toString();
        }
        if (c != '\\') {
          s.append(c);
          continue;
        }
        if (at >= json.length()) {
          throw bad("ends inside an escape");
        }
        char e = json.charAt(at++);
        switch (e) {
          case '"', '\\', '/' -> s.append(e);
          case 'b' -> s.append('\b');
          case 'f' -> s.append('\f');
          case 'n' -> s.append('\n');
          case 'r' -> s.append('\r');
          case 't' -> s.append('\t');
          case 'u' -> {
            if (at + 4 > json.length()) {
              throw bad("ends inside a \\u escape");
            }
            try {
              s.append((char) Integer.parseInt(json.substring(at, at + 4), 16));
            } catch (NumberFormatException notHex) {
              throw bad("has a \\u escape that is not four hex digits at " + at);
            }
            at += 4;
          }
          default -> throw bad("has an unknown escape \\" + e + " at " + (at - 1));
        }
      }
    }

    /** The next character after whitespace, or 0 at the end. */
    private char peek() {
      while (at < json.length() && Character.isWhitespace(json.charAt(at))) {
        at++;
      }
      return at < json.length() ? json.charAt(at) : 0;
    }

    private char next() {
      char c = peek();
      if (c == 0) {
        throw bad("ends early");
      }
      at++;
      return c;
    }

    private void expect(char c) {
      char got = peek();
      if (got != c) {
        throw bad(got == 0 ? "ends where '" + c + "' belongs" : "has '" + got + "' where '" + c + "' belongs (at " + at + ")");
      }
      at++;
    }

    private IllegalStateException bad(String why) {
      return new IllegalStateException(what + " is not a JSON array of strings: it " + why);
    }
  }
}
