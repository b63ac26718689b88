package dev.idem.http;

import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;

/**
 * When a stored key is forgotten, as the client is told in {@link
 * IdempotencyKeyFilter#IDEMPOTENCY_KEY_EXPIRES}: an HTTP-date (RFC 9110, IMF-fixdate), rounded
 * <em>down</em> to the second, so the key is remembered at least until the time the client reads (a
 * client that trusted a later time could send the key again after it was forgotten, and run the
 * intent twice).
 */
final class KeyExpiry {
  private static final DateTimeFormatter HTTP_DATE = DateTimeFormatter.RFC_1123_DATE_TIME.withZone(ZoneOffset.UTC);

  private KeyExpiry() {}

  static String header(Instant expires) {
    return HTTP_DATE.format(expires.truncatedTo(ChronoUnit.SECONDS));
  }

  /**
   * The key row's {@code expires_at} (written from the database clock by the claim), read in the
   * transaction that claimed it: the row is this transaction's own, so it is there and no other
   * copy can have changed it. Null if there is none (it cannot happen under the executor's claim).
   */
  static Instant read(Tx tx, String schema, IdempotencyKey key) throws SQLException {
    Connection c = tx.connection();
    boolean mariadb = DatabaseClock.mariadb(tx);
    // The schema is idem's (validated by Idem.builder); quoted as each database quotes names.
    String table = mariadb ? "`" + schema + "`.idem_keys" : "\"" + schema + "\".idem_keys";
    try (PreparedStatement s = c.prepareStatement("SELECT expires_at FROM " + table + " WHERE scope = ? AND idem_keys.key = ?")) {
      s.setString(1, key.scope());
      s.setString(2, key.value());
      try (ResultSet rs = s.executeQuery()) {
        if (!rs.next()) {
          return null;
        }
        if (mariadb) {
          // a DATETIME holding UTC: read as it is, never through the session's or the JVM's zone
          LocalDateTime utc = rs.getObject(1, LocalDateTime.class);
          return utc == null ? null : utc.toInstant(ZoneOffset.UTC);
        }
        OffsetDateTime t = rs.getObject(1, OffsetDateTime.class);
        return t == null ? null : t.toInstant();
      }
    }
  }
}
