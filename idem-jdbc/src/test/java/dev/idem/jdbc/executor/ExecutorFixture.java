package dev.idem.jdbc.executor;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * One database per test class, with idem migrated and a {@code payments} table standing for the
 * user's own effect. Everything the tests assert is read back from here.
 */
final class ExecutorFixture implements AutoCloseable {
  final TestDatabase db;
  final DataSource ds;
  final Idem idem;
  final RecordingListener events = new RecordingListener();

  ExecutorFixture(String hint, int poolSize) {
    db = TestPostgres.newDatabase(hint);
    ds = db.dataSource(poolSize);
    idem = Idem.builder(ds).listener(events).build();
    IdemFlyway.migrate(ds);
    sql("CREATE TABLE payments (id bigserial PRIMARY KEY, request text NOT NULL, amount int NOT NULL)");
    sql(Provider.TABLE);
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
    return count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + key.scope() + "' AND key = '" + key.value() + "'");
  }

  /** The key's row as text, for "unchanged" checks: every column. */
  String keyRow(IdempotencyKey key) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT k::text FROM idem.idem_keys k WHERE scope = ? AND key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  String column(IdempotencyKey key, String column) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(
            "SELECT (" + column + ")::text FROM idem.idem_keys WHERE scope = ? AND key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    db.close();
  }
}
