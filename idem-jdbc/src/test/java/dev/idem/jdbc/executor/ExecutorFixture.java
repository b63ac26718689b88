package dev.idem.jdbc.executor;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.Poll;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;

/**
 * A test class's database as {@code @IdemTest(sql = {PAYMENTS, Provider.TABLE})} gives it (idem
 * migrated, a {@code payments} table standing for the user's own effect and the provider's), and an
 * {@link Idem} on its pool whose events are recorded. Everything the tests assert is read back from
 * here.
 */
final class ExecutorFixture {
  /** The user's effect's table: one row per payment. */
  static final String PAYMENTS = "CREATE TABLE payments (id bigserial PRIMARY KEY, request text NOT NULL, amount int NOT NULL)";

  final TestDatabase db;
  final DataSource ds;
  final Idem idem;
  final RecordingListener events = new RecordingListener();

  /** On the database and pool {@code @IdemTest} injected. */
  ExecutorFixture(TestDatabase db, DataSource ds) {
    this.db = db;
    this.ds = ds;
    idem = Idem.builder(ds).listener(events).build();
  }

  /** The user's effect: one payment row; returns its id as text. */
  static String pay(Tx tx, String request, int amount) throws SQLException {
    try (PreparedStatement ps = tx.connection().prepareStatement(
        "INSERT INTO payments (request, amount) VALUES (?, ?) RETURNING id")) {
      ps.setString(1, request);
      ps.setInt(2, amount);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return "payment-" + rs.getLong(1);
      }
    }
  }

  /** A codec that cannot encode any result ("no encoding for <value>"), named "BrokenCodec". */
  static Codec<String> unencodable() {
    return new Codec<>() {
      @Override
      public byte[] encode(String value) {
        throw new IllegalStateException("no encoding for " + value);
      }

      @Override
      public String decode(byte[] bytes) {
        throw new AssertionError("nothing was stored, so nothing is decoded");
      }

      @Override
      public String toString() {
        return "BrokenCodec";
      }
    };
  }

  /**
   * An executor and an inbox ({@code consumer}) on a pool of their own whose sessions have a
   * statement_timeout of 300 ms, shorter than the 1.5 s each waits for a copy in flight.
   */
  record TimedGuards(HikariDataSource pool, IdempotentExecutor executor, Inbox inbox) implements AutoCloseable {
    @Override
    public void close() {
      pool.close();
    }
  }

  TimedGuards underShortStatementTimeout(int poolSize, String consumer) {
    HikariDataSource pool = db.dataSourceWithDriverParams(poolSize, "options=-c%20statement_timeout%3D300");
    Idem timed = Idem.builder(pool).build();
    return new TimedGuards(pool, timed.executor().inFlightWait(Duration.ofMillis(1500)).build(),
        timed.inbox(consumer).inFlightWait(Duration.ofMillis(1500)).build());
  }

  /**
   * In {@code holder}'s open transaction: claims {@code key} on {@code executor} and {@code
   * request} as an id on {@code inbox}, paying once for each, so that copies of either wait on it.
   */
  static void hold(Connection holder, IdempotentExecutor executor, Inbox inbox, IdempotencyKey key, String request)
      throws SQLException {
    executor.execute(holder, key, Fingerprint.EMPTY, Codec.utf8(), tx -> pay(tx, request, 1));
    inbox.receive(holder, request, tx -> pay(tx, request, 1));
  }

  void sql(String statement) {
    db.execute(statement);
  }

  long count(String query, Object... params) {
    return db.count(query, params);
  }

  long payments(String request) {
    return count("SELECT count(*) FROM payments WHERE request = '" + request + "'");
  }

  long keyRows(IdempotencyKey key) {
    return count("SELECT count(*) FROM idem_keys WHERE scope = '" + key.scope() + "' AND key = '" + key.value() + "'");
  }

  /** The key's row as text, for "unchanged" checks: every column. */
  String keyRow(IdempotencyKey key) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT k::text FROM idem_keys k WHERE scope = ? AND key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Returns once {@code key}'s row is past its window, and its lease if it has one, by the database
   * clock, which is what the guards judge by (an answer kept in memory ends no later).
   */
  void awaitPastWindow(IdempotencyKey key) throws InterruptedException {
    Poll.until("the window of " + key + " over on the database clock", () -> count("SELECT count(*) FROM idem_keys"
        + " WHERE scope = ? AND key = ? AND expires_at < clock_timestamp()"
        + " AND coalesce(lease_expires_at, '-infinity') < clock_timestamp()", key.scope(), key.value()) == 1);
  }

  /** Returns once {@code key}'s lease is over by the database clock. */
  void awaitLeaseOver(IdempotencyKey key) throws InterruptedException {
    Poll.until("the lease of " + key + " over on the database clock", () -> count("SELECT count(*) FROM idem_keys"
        + " WHERE scope = ? AND key = ? AND lease_expires_at < clock_timestamp()", key.scope(), key.value()) == 1);
  }

  String column(IdempotencyKey key, String column) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(
            "SELECT (" + column + ")::text FROM idem_keys WHERE scope = ? AND key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
