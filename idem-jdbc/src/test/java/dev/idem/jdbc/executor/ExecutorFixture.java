package dev.idem.jdbc.executor;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.VendorSql;
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
 * here, in the SQL of the database the run is on ({@link VendorSql}).
 */
final class ExecutorFixture {
  /**
   * The user's effect's table: one row per payment. SQL both databases accept ({@code serial}:
   * PostgreSQL's integer sequence, MariaDB's BIGINT AUTO_INCREMENT).
   */
  static final String PAYMENTS = "CREATE TABLE payments (id serial PRIMARY KEY, request text NOT NULL, amount int NOT NULL)";

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
   * PostgreSQL's session setting ({@link #statementTimeoutParams}).
   */
  record TimedGuards(HikariDataSource pool, IdempotentExecutor executor, Inbox inbox) implements AutoCloseable {
    @Override
    public void close() {
      pool.close();
    }
  }

  TimedGuards underShortStatementTimeout(int poolSize, String consumer) {
    HikariDataSource pool = db.dataSourceWithDriverParams(poolSize, statementTimeoutParams(300));
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

  /**
   * Driver parameters giving every session a statement time limit of {@code millis}: PostgreSQL's
   * statement_timeout, MariaDB's max_statement_time (seconds, to the microsecond).
   */
  String statementTimeoutParams(int millis) {
    return VendorSql.maria(db) ? "sessionVariables=max_statement_time=" + millis / 1000.0
        : "options=-c%20statement_timeout%3D" + millis;
  }

  boolean maria() {
    return VendorSql.maria(db);
  }

  /** The database clock, comparable with idem's times ({@link VendorSql#clock}). */
  String clock() {
    return VendorSql.clock(db);
  }

  /** The database clock moved by {@code offset}. */
  String clockPlus(Duration offset) {
    return VendorSql.clockPlus(db, offset);
  }

  /** The key row's result as UTF-8 text, for {@link #column}. */
  String resultText() {
    return VendorSql.utf8(db, "result");
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
    return count("SELECT count(*) FROM idem_keys k WHERE k.scope = '" + key.scope() + "' AND k.key = '" + key.value() + "'");
  }

  /** The key's row as text, for "unchanged" checks: every column (MariaDB: each quoted, NULL as NULL). */
  String keyRow(IdempotencyKey key) {
    String row = maria()
        ? "CONCAT_WS(',', QUOTE(k.fence), QUOTE(k.created_at), QUOTE(k.expires_at), QUOTE(k.completed_at),"
            + " QUOTE(k.lease_expires_at), QUOTE(k.scope), QUOTE(k.key), QUOTE(HEX(k.fingerprint)), QUOTE(k.state),"
            + " QUOTE(k.call_key), QUOTE(HEX(k.result)))"
        : "k::text";
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT " + row + " FROM idem_keys k WHERE k.scope = ? AND k.key = ?")) {
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
    Poll.until("the window of " + key + " over on the database clock", () -> count("SELECT count(*) FROM idem_keys k"
        + " WHERE k.scope = ? AND k.key = ? AND k.expires_at < " + clock()
        + " AND (k.lease_expires_at IS NULL OR k.lease_expires_at < " + clock() + ")", key.scope(), key.value()) == 1);
  }

  /** Returns once {@code key}'s lease is over by the database clock. */
  void awaitLeaseOver(IdempotencyKey key) throws InterruptedException {
    Poll.until("the lease of " + key + " over on the database clock", () -> count("SELECT count(*) FROM idem_keys k"
        + " WHERE k.scope = ? AND k.key = ? AND k.lease_expires_at < " + clock(), key.scope(), key.value()) == 1);
  }

  /** An expression over the key's row ({@code k}, its columns unqualified), as text; null if none or NULL. */
  /**
   * An INSERT of a key row in flight, as an external claim's phase 1 leaves it (state 'I', fence
   * 1), the scope and key bound ({@code ?, ?}); every time the database clock moved by the offset
   * given, the fingerprint an SQL literal (e.g. {@link VendorSql#emptyFingerprint}).
   */
  String inFlightRow(String fingerprint, Duration leaseEnds, String callKey, Duration created, Duration expires) {
    return "INSERT INTO idem_keys (scope, " + VendorSql.quoted(db, "key") + ", fingerprint, state, fence, lease_expires_at,"
        + " call_key, created_at, expires_at) VALUES (?, ?, " + fingerprint + ", 'I', 1, " + clockPlus(leaseEnds) + ", '"
        + callKey + "', " + clockPlus(created) + ", " + clockPlus(expires) + ")";
  }

  /** Inserts {@code key}'s row as {@link #inFlightRow} says, committed. */
  void insertInFlight(IdempotencyKey key, String fingerprint, Duration leaseEnds, String callKey, Duration created,
      Duration expires) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(inFlightRow(fingerprint, leaseEnds, callKey, created, expires))) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      ps.executeUpdate();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Ends {@code key}'s lease {@code ago} before now on the database clock. */
  void endLease(IdempotencyKey key, Duration ago) {
    sql("UPDATE idem_keys k SET lease_expires_at = " + clockPlus(ago.negated()) + " WHERE k.scope = '" + key.scope()
        + "' AND k.key = '" + key.value() + "'");
  }

  /** Whether {@code key}'s row has a lease that has ended by the database clock. */
  boolean leaseEnded(IdempotencyKey key) {
    return count("SELECT count(*) FROM idem_keys k WHERE k.scope = ? AND k.key = ? AND k.lease_expires_at <= " + clock(),
        key.scope(), key.value()) == 1;
  }

  String column(IdempotencyKey key, String column) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(
            "SELECT " + VendorSql.text(db, column) + " FROM idem_keys k WHERE k.scope = ? AND k.key = ?")) {
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
