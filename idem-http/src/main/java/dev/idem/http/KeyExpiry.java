package dev.idem.http;

import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
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
    boolean mariadb = DatabaseClock.mariadb(tx);
    String sql = "SELECT expires_at FROM " + DatabaseClock.keysTable(mariadb, schema) + " WHERE scope = ? AND idem_keys.key = ?";
    try (PreparedStatement s = tx.connection().prepareStatement(sql)) {
      s.setString(1, key.scope());
      s.setString(2, key.value());
      try (ResultSet rs = s.executeQuery()) {
        return rs.next() ? DatabaseClock.instant(rs, 1, mariadb) : null;
      }
    }
  }
}
