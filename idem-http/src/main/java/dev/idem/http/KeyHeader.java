package dev.idem.http;

import dev.idem.key.IdempotencyKey;

/**
 * Reads the key out of one {@code Idempotency-Key} field value. The draft makes it an RFC 8941
 * Item whose value is an sf-string: {@code "8e03978e-40d5"}, with {@code \"} and {@code \\} the only
 * escapes. Many clients (Stripe's among them) send the key bare, unquoted; that form is taken as
 * it is when allowed. Either way the key must then pass {@link IdempotencyKey}'s rules (visible
 * ASCII, at most 255 characters), so a space, legal inside an sf-string, is refused too.
 */
final class KeyHeader {
  private KeyHeader() {}

  /** Why a field value is not a key: the message is the problem's detail, safe to show a client. */
  static final class Malformed extends Exception {
    private static final long serialVersionUID = 1L;

    Malformed(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * The key in {@code field}, the value of the header named {@code header}.
   *
   * @param bare whether an unquoted key is accepted
   */
  static String parse(String header, String field, boolean bare) throws Malformed {
    String text = trimOws(field);
    if (text.isEmpty()) {
      throw new Malformed(header + " is empty");
    }
    String key = text.charAt(0) == '"' ? sfString(header, text) : bareKey(header, text, bare);
    try {
      return IdempotencyKey.check(header, key);
    } catch (IllegalArgumentException e) {
      throw new Malformed(e.getMessage());
    }
  }

  /** RFC 8941 section 4.2.5, for an Item that must be a String with no parameters. */
  private static String sfString(String header, String text) throws Malformed {
    StringBuilder out = new StringBuilder(text.length());
    int i = 1;
    while (true) {
      if (i >= text.length()) {
        throw new Malformed(header + " has no closing double quote");
      }
      char c = text.charAt(i++);
      if (c == '\\') {
        if (i >= text.length()) {
          throw new Malformed(header + " ends inside an escape");
        }
        char escaped = text.charAt(i++);
        if (escaped != '"' && escaped != '\\') {
          throw new Malformed(header + " has the escape \\" + escaped + "; a Structured Field string allows only"
              + " \\\" and \\\\");
        }
        out.append(escaped);
      } else if (c == '"') {
        break;
      } else if (c < 0x20 || c > 0x7e) {
        throw new Malformed(header + " has a character outside visible ASCII and space (U+"
            + String.format("%04X", (int) c) + ")");
      } else {
        out.append(c);
      }
    }
    if (i < text.length()) {
      char next = text.charAt(i);
      throw new Malformed(header + (next == ',' ? " is a list; send exactly one key"
          : next == ';' ? " has parameters; send the key alone" : " has text after its closing double quote"));
    }
    return out.toString();
  }

  private static String bareKey(String header, String text, boolean bare) throws Malformed {
    if (!bare) {
      throw new Malformed(header + " must be a Structured Field string: the key in double quotes, e.g. "
          + header + ": \"8e03978e-40d5-43e8-bc93-6894a57f9324\"");
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == ',') {
        // What a proxy makes of two header lines; taking it as one key would hide the second.
        throw new Malformed(header + " is a list; send exactly one key");
      }
      if (c == '"' || c == '\\') {
        throw new Malformed(header + " has a stray " + c + "; quote the whole key, or send it bare without it");
      }
    }
    return text;
  }

  /** A field value without the spaces and tabs around it (RFC 9110 OWS). */
  private static String trimOws(String field) {
    int start = 0;
    int end = field.length();
    while (start < end && (field.charAt(start) == ' ' || field.charAt(start) == '\t')) {
      start++;
    }
    while (end > start && (field.charAt(end - 1) == ' ' || field.charAt(end - 1) == '\t')) {
      end--;
    }
    return field.substring(start, end);
  }
}
