package dev.idem.key;

import dev.idem.internal.base.Sha256;
import java.lang.reflect.Array;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.RecordComponent;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
    if (hex == null || hex.length() != 64 || !isLowerHex(hex)) {
      throw new IllegalArgumentException("fingerprint must be 64 lower-case hex characters, was " + hex);
    }
  }

  /** Whether every character of {@code s} is a lower-case hex digit (the form fingerprints are kept in). */
  static boolean isLowerHex(String s) {
    // a loop, not a stream: every fingerprint made is checked here, on the caller's hot path
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) {
        return false;
      }
    }
    return true;
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
   * The fingerprint of a map of fields, independent of their order.
   *
   * <p>Values may be: {@code null}; strings and characters; numbers (by their decimal text, so
   * {@code 40} and {@code 40.0} differ, and {@code 40} and {@code "40"} differ too); booleans;
   * enums (by name); byte arrays; an {@code Optional}, by its value (or as empty); nested maps
   * (order-independent, names by their text); sets (order-independent); records, by their components (each name and value, in declaration order,
   * by these same rules; the record's class name is not part of it, so renaming the class keeps the
   * fingerprint); lists, other iterables and arrays (order matters); and any other object whose
   * class defines its own {@code toString()} (a {@code UUID}, an {@code Instant}, a {@code Path}),
   * taken by that text. Each value carries its kind, and every text is length-prefixed, so two maps
   * encode alike only if they have the same names (by text) and equal values, where equal means:
   * numbers with the same decimal text (whatever their type: {@code 40} and {@code 40L} agree), a
   * character and its one-character string, an array and a list of the same items, two records with
   * the same component names and values. No text inside a value can imitate a boundary between
   * values.
   *
   * @throws IllegalArgumentException if {@code fields} is null, a name is null, two names of one
   *     map read the same, a map, list or record contains itself, a value or a nested map's name is
   *     of a class without its own {@code toString()} (its text would hold an identity hash that
   *     differs on every JVM, so a retry on another machine would look like a different request),
   *     or a record's component cannot be read (a record in a package not open to {@code
   *     dev.idem.core}) or its accessor throws
   */
  public static Fingerprint ofFields(Map<String, ?> fields) {
    return of(canonical(fields));
  }

  /**
   * The canonical text {@link #ofFields} hashes; see there for the rules. Exposed so that a
   * fingerprint can be reproduced and debugged; its exact form may change between major versions.
   */
  public static String canonical(Map<String, ?> fields) {
    if (fields == null) {
      throw new IllegalArgumentException("fields must not be null");
    }
    StringBuilder out = new StringBuilder();
    append(out, "fields", fields, Collections.newSetFromMap(new IdentityHashMap<>()));
    return out.toString();
  }

  private static void append(StringBuilder out, String path, Object value, Set<Object> open) {
    if (value == null) {
      out.append('n');
    } else if (value instanceof CharSequence || value instanceof Character) {
      out.append('s');
      token(out, value.toString());
    } else if (value instanceof Number) {
      out.append('d');
      token(out, value.toString());
    } else if (value instanceof Boolean) {
      out.append((Boolean) value ? 'T' : 'F');
    } else if (value instanceof Enum<?> e) {
      out.append('e');
      token(out, e.name());
    } else if (value instanceof byte[] bytes) {
      out.append('b');
      token(out, HexFormat.of().formatHex(bytes));
    } else if (value instanceof Map<?, ?> map) {
      enter(open, value, path);
      TreeMap<String, Object> sorted = new TreeMap<>();
      for (Map.Entry<?, ?> e : map.entrySet()) {
        if (e.getKey() == null) {
          throw new IllegalArgumentException(path + " has a null name");
        }
        if (!ownToString(e.getKey().getClass())) {
          throw new IllegalArgumentException(path + " has a name of class " + e.getKey().getClass().getName()
              + ", which has no toString() of its own: its text would differ on every JVM; use strings as names");
        }
        String name = e.getKey().toString();
        if (sorted.containsKey(name)) {
          // Two names that read alike (1 and "1") would otherwise drop one of the fields silently.
          throw new IllegalArgumentException(path + " has two names that read \"" + name + "\"");
        }
        sorted.put(name, e.getValue());
      }
      out.append('{').append(sorted.size()).append(':');
      sorted.forEach((k, v) -> {
        token(out, k);
        append(out, path + "." + k, v, open);
      });
      out.append('}');
      open.remove(value);
    } else if (value instanceof Set<?> set) {
      // A set has no order; two equal sets built in another order (or on a JVM with another hash
      // seed) must encode alike, so the members are sorted by their own encoding.
      enter(open, value, path);
      List<String> members = new ArrayList<>();
      int i = 0;
      for (Object member : set) {
        StringBuilder one = new StringBuilder();
        append(one, path + "{" + i++ + "}", member, open);
        members.add(one.toString());
      }
      Collections.sort(members);
      out.append('<').append(members.size()).append(':');
      members.forEach(out::append);
      out.append('>');
      open.remove(value);
    } else if (value instanceof Record) {
      // By its components, never its toString(): that prints an array component as an identity
      // hash (a different text on every call) and does not escape the text between components.
      enter(open, value, path);
      RecordComponent[] components = value.getClass().getRecordComponents();
      out.append('(').append(components.length).append(':');
      for (RecordComponent component : components) {
        token(out, component.getName());
        append(out, path + "." + component.getName(), componentOf(value, component, path), open);
      }
      out.append(')');
      open.remove(value);
    } else if (value instanceof java.util.Optional<?> optional) {
      // Never by its toString(): "Optional[...]" prints its value's own text, unescaped (a list of
      // "a, b" reads as a list of "a" and "b") or with an identity hash (an array).
      out.append('?');
      append(out, path + ".get()", optional.orElse(null), open);
    } else if (value instanceof Path) {
      // A Path is Iterable over its names, each a Path again that iterates over itself: by its text.
      out.append('o');
      token(out, value.toString());
    } else if (value instanceof Iterable<?> || value.getClass().isArray()) {
      enter(open, value, path);
      List<Object> items = new ArrayList<>();
      if (value instanceof Iterable<?> iterable) {
        iterable.forEach(items::add);
      } else {
        for (int i = 0; i < Array.getLength(value); i++) {
          items.add(Array.get(value, i));
        }
      }
      out.append('[').append(items.size()).append(':');
      for (int i = 0; i < items.size(); i++) {
        append(out, path + "[" + i + "]", items.get(i), open);
      }
      out.append(']');
      open.remove(value);
    } else {
      if (ownToString(value.getClass())) {
        out.append('o');
        token(out, value.toString());
      } else {
        throw new IllegalArgumentException(
            path + " is a " + value.getClass().getName() + ", which has no toString() of its own: its"
                + " text would differ on every JVM; pass its fields as a map, or a string");
      }
    }
  }

  private static Object componentOf(Object record, RecordComponent component, String path) {
    Method accessor = component.getAccessor();
    if (!accessor.canAccess(record) && !accessor.trySetAccessible()) {
      throw new IllegalArgumentException(path + " is a " + record.getClass().getName() + " whose component "
          + component.getName() + " idem cannot read: make the record public in an exported package, open its"
          + " package to dev.idem.core, or pass its fields as a map");
    }
    try {
      return accessor.invoke(record);
    } catch (IllegalAccessException e) {
      throw new IllegalArgumentException(path + "." + component.getName() + " could not be read: " + e.getMessage(), e);
    } catch (InvocationTargetException e) {
      throw new IllegalArgumentException(path + "." + component.getName() + "() threw " + e.getCause(), e.getCause());
    }
  }

  private static void enter(Set<Object> open, Object container, String path) {
    if (!open.add(container)) {
      throw new IllegalArgumentException(path + " contains itself; a request has no cycles");
    }
  }

  private static boolean ownToString(Class<?> type) {
    return OWN_TO_STRING.get(type);
  }

  /**
   * Whether a class declares or inherits a toString() other than Object's, worked out once per
   * class: {@code getMethod} copies a {@code Method} on every call, and every value of a
   * fingerprinted map asks (the names too).
   */
  private static final ClassValue<Boolean> OWN_TO_STRING = new ClassValue<>() {
    @Override
    protected Boolean computeValue(Class<?> type) {
      try {
        return type.getMethod("toString").getDeclaringClass() != Object.class;
      } catch (NoSuchMethodException e) {
        return false; // cannot happen: every class has toString()
      }
    }
  };

  private static void token(StringBuilder out, String text) {
    out.append(text.length()).append('#').append(text);
  }

  @Override
  public String toString() {
    return hex.substring(0, 12) + "…";
  }
}
