package dev.idem.key;

import dev.idem.internal.Sha256;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * SHA-256 of a request in canonical form, stored with its key so that a key reused for a
 * different request is refused ({@link KeyReuseException}, HTTP 422) instead of silently getting
 * the first request's result.
 *
 * <p>Guarantees: the same canonical bytes give the same fingerprint on every machine; {@link
 * #ofFields} gives the same fingerprint for the same fields in any order.
 *
 * <p>Does not guarantee: that two requests meaning the same thing have the same bytes. Fingerprint
 * what defines the intent (amount, currency, account), not what varies between honest retries (a
 * request timestamp, a trace id).
 *
 * @param hex 64 lower-case hex characters
 */
public record Fingerprint(String hex) {

  public Fingerprint {
    if (hex == null || hex.length() != 64 || !hex.chars().allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      throw new IllegalArgumentException("fingerprint must be 64 lower-case hex characters, was " + hex);
    }
  }

  /** The fingerprint of a request with no content: for keys whose only meaning is the key. */
  public static final Fingerprint EMPTY = of(new byte[0]);

  /** The fingerprint of canonical request bytes. */
  public static Fingerprint of(byte[] canonical) {
    if (canonical == null) {
      throw new IllegalArgumentException("canonical request bytes must not be null");
    }
    return new Fingerprint(Sha256.hex(canonical));
  }

  /** The fingerprint of a request already in a canonical text form (UTF-8). */
  public static Fingerprint of(String canonical) {
    if (canonical == null) {
      throw new IllegalArgumentException("canonical request must not be null");
    }
    return of(canonical.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The fingerprint of a map of fields, independent of their order. Values may be strings,
   * numbers, booleans, {@code null}, byte arrays, nested maps (also order-independent) and lists
   * (order matters); anything else is taken by its {@code toString()}.
   */
  public static Fingerprint ofFields(Map<String, ?> fields) {
    if (fields == null) {
      throw new IllegalArgumentException("fields must not be null");
    }
    return of(canonical(fields));
  }

  /**
   * The canonical text {@link #ofFields} hashes. Every token is length-prefixed, so no choice of
   * field names or values can make two different maps encode alike.
   */
  public static String canonical(Map<String, ?> fields) {
    StringBuilder out = new StringBuilder();
    append(out, fields);
    return out.toString();
  }

  private static void append(StringBuilder out, Object value) {
    if (value == null) {
      out.append('n');
    } else if (value instanceof Map<?, ?> map) {
      TreeMap<String, Object> sorted = new TreeMap<>();
      for (Map.Entry<?, ?> e : map.entrySet()) {
        if (e.getKey() == null) {
          throw new IllegalArgumentException("fields must not have a null name");
        }
        sorted.put(e.getKey().toString(), e.getValue());
      }
      out.append('{').append(sorted.size()).append(':');
      sorted.forEach((k, v) -> {
        token(out, k);
        append(out, v);
      });
      out.append('}');
    } else if (value instanceof Iterable<?> items) {
      List<Object> list = new ArrayList<>();
      items.forEach(list::add);
      out.append('[').append(list.size()).append(':');
      list.forEach(v -> append(out, v));
      out.append(']');
    } else if (value instanceof byte[] bytes) {
      out.append('b');
      token(out, HexFormat.of().formatHex(bytes));
    } else {
      out.append('s');
      token(out, value.toString());
    }
  }

  private static void token(StringBuilder out, String text) {
    out.append(text.length()).append('#').append(text);
  }

  @Override
  public String toString() {
    return hex.substring(0, 12) + "…";
  }
}
