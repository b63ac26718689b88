package dev.idem.http;

import dev.idem.key.IdempotencyKey;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;

/**
 * A {@code GET} of a long operation's status resource: the request's key, under the caller's
 * scope, read from idem's key table together with its final response's key. Answers the final
 * response once recorded, else the stored 202 (after waiting for the final one up to what {@code
 * Prefer: wait} asks, capped), and 404 when the caller has no such operation.
 *
 * <p>Why it polls rather than holds a connection: a wait of seconds on a pool connection, per
 * waiting client, would take the pool; each read here is one short transaction, and the sleeps
 * between them hold only the request thread. The sleeps grow from {@value #FIRST_PAUSE_MS} ms to
 * {@value #LONGEST_PAUSE_MS} ms, so a result recorded soon is seen soon and a long wait costs a few
 * reads a second.
 */
final class OperationStatus {
  private static final long FIRST_PAUSE_MS = 10;
  private static final long LONGEST_PAUSE_MS = 200;
  private static final Duration FIRST_PAUSE = Duration.ofMillis(FIRST_PAUSE_MS);
  private static final Duration LONGEST_PAUSE = Duration.ofMillis(LONGEST_PAUSE_MS);

  private OperationStatus() {}

  /** The accepted response and the final one (null until recorded), and the key's expiry. */
  private record Rows(StoredResponse accepted, StoredResponse result, Instant expires) {}

  /** The key value named by {@code request}'s path under {@code operations}' status path, or null if the path names none. */
  static String keyValueOf(HttpServletRequest request, LongOperations operations) {
    String path = request.getRequestURI().substring(request.getContextPath().length());
    String prefix = operations.statusPath();
    if (!path.startsWith(prefix)) {
      return null;
    }
    String segment = path.substring(prefix.length());
    return segment.isEmpty() || segment.indexOf('/') >= 0 ? null : segment;
  }

  /** Answers the GET of {@code segment} (the path's last segment, encoded) for the caller of {@code scope}. */
  static void answer(HttpServletRequest request, HttpServletResponse response, LongOperations operations, String scope,
      String segment, URI problemTypeBase) throws IOException {
    Duration asked;
    try {
      asked = preferredWait(request.getHeaders("Prefer"));
    } catch (IllegalArgumentException malformed) {
      Problem.preferWaitMalformed(malformed.getMessage()).send(response, problemTypeBase);
      return;
    }
    String value = LongOperations.decode(segment);
    IdempotencyKey key;
    try {
      key = value == null ? null : IdempotencyKey.of(scope, value);
    } catch (IllegalArgumentException notAKey) {
      key = null;
    }
    if (key == null) {
      Problem.operationUnknown().send(response, problemTypeBase);
      return;
    }
    Duration wait = asked == null ? Duration.ZERO : asked.compareTo(operations.maxWait()) > 0 ? operations.maxWait() : asked;
    Pauses pauses = new Pauses(wait, FIRST_PAUSE, LONGEST_PAUSE);
    while (true) {
      Rows rows = read(operations, key);
      if (rows == null || rows.accepted().status() != HttpServletResponse.SC_ACCEPTED) {
        // Unknown, forgotten, another caller's (not under this scope), or not a long operation: one answer for all.
        Problem.operationUnknown().send(response, problemTypeBase);
        return;
      }
      String expires = KeyExpiry.header(rows.expires());
      if (rows.result() != null) {
        rows.result().writeTo(response, IdempotencyKeyFilter.IDEMPOTENCY_KEY_EXPIRES, expires, "Cache-Control", "no-store");
        return;
      }
      if (!pauses.next()) {
        rows.accepted().writeTo(response, "Retry-After", Long.toString(IdempotencyKeyFilter.seconds(operations.retryAfter())),
            IdempotencyKeyFilter.IDEMPOTENCY_KEY_EXPIRES, expires, "Cache-Control", "no-store");
        return;
      }
    }
  }


  /**
   * Both rows of {@code key} in one short transaction (its own connection, returned at once): the
   * accepted request's and its final response's, each only while remembered by the database clock.
   * Null when the request's row is not there.
   */
  private static Rows read(LongOperations operations, IdempotencyKey key) {
    IdempotencyKey result = LongOperations.resultKey(key);
    return operations.idem().<Rows, RuntimeException>inTransaction(tx -> {
      boolean mariadb = DatabaseClock.mariadb(tx);
      String sql = "SELECT idem_keys.key, result, expires_at FROM " + DatabaseClock.keysTable(mariadb, operations.idem().schema())
          + " WHERE scope = ? AND idem_keys.key IN (?, ?) AND state = 'C' AND expires_at > "
          + (mariadb ? "UTC_TIMESTAMP(6)" : "clock_timestamp()");
      StoredResponse accepted = null;
      StoredResponse done = null;
      Instant expires = null;
      try (PreparedStatement s = tx.connection().prepareStatement(sql)) {
        s.setString(1, key.scope());
        s.setString(2, key.value());
        s.setString(3, result.value());
        try (ResultSet rs = s.executeQuery()) {
          while (rs.next()) {
            byte[] bytes = rs.getBytes(2);
            StoredResponse stored = bytes == null ? null : ResponseCodec.INSTANCE.decode(bytes);
            if (key.value().equals(rs.getString(1))) {
              accepted = stored;
              expires = DatabaseClock.instant(rs, 3, mariadb);
            } else {
              done = stored;
            }
          }
        }
      } catch (SQLException | IOException e) {
        throw new IllegalStateException("could not read long operation " + key + " from idem's key table: " + e, e);
      }
      return accepted == null ? null : new Rows(accepted, done, expires);
    });
  }

  /**
   * The wait a request asks for with {@code Prefer: wait=N} (RFC 7240: delta-seconds; the first
   * {@code wait} counts, other preferences are ignored), or null if it asks none.
   *
   * @throws IllegalArgumentException with the client's explanation, if a wait is given that is not
   *     a whole number of seconds
   */
  static Duration preferredWait(Enumeration<String> headers) {
    while (headers != null && headers.hasMoreElements()) {
      for (String preference : splitOutsideQuotes(headers.nextElement(), ',')) {
        String token = splitOutsideQuotes(preference, ';').get(0).trim();
        int eq = token.indexOf('=');
        String name = (eq < 0 ? token : token.substring(0, eq)).trim();
        if (!name.equalsIgnoreCase("wait")) {
          continue;
        }
        String value = eq < 0 ? "" : token.substring(eq + 1).trim();
        if (value.length() >= 2 && value.startsWith("\"") && value.endsWith("\"")) {
          value = value.substring(1, value.length() - 1);
        }
        if (value.isEmpty() || !value.chars().allMatch(c -> c >= '0' && c <= '9')) {
          throw new IllegalArgumentException("Prefer: wait=" + value + " is not a number of seconds: send wait=N, N a"
              + " whole number of seconds (0 or more) to wait for the operation's result");
        }
        // a number too long for a long asks for more than any cap: the cap applies
        return value.length() > 12 ? Duration.ofSeconds(999_999_999_999L) : Duration.ofSeconds(Long.parseLong(value));
      }
    }
    return null;
  }

  private static List<String> splitOutsideQuotes(String text, char separator) {
    List<String> parts = new ArrayList<>();
    boolean quoted = false;
    int start = 0;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '\\' && quoted) {
        i++;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == separator && !quoted) {
        parts.add(text.substring(start, i));
        start = i + 1;
      }
    }
    parts.add(text.substring(start));
    return parts;
  }
}
