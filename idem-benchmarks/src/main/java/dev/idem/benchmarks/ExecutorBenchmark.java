package dev.idem.benchmarks;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The executor's cost against the same work done bare, in one run, one pool, 8 threads, one
 * database: PostgreSQL, or MariaDB, as {@link TestDatabase#newDatabase} picks it (IDEM_JDBC_URL, or
 * IDEM_TEST_DATABASE=mariadb):
 *
 * <ul>
 *   <li>{@link #bareEffect} (a): a transaction inserting one payment row, plain JDBC;
 *   <li>{@link #executorNewKey} (b): the same effect through the executor, a new key each time,
 *       the insert given as a jOOQ statement: the claim, the insert and COMMIT in one round trip,
 *       the claim first; nothing stored;
 *   <li>{@link #executorNewKeyCallback} (b1): the same effect as a callback, its result (the
 *       payment id) stored for replay; the default order: claim, effect, result with COMMIT;
 *   <li>{@link #executorNewKeyNoResult} (b'): as (b1) with {@code Codec.none()}, which skips the
 *       result UPDATE;
 *   <li>{@link #executorReplay} (c): a repeat of a completed key, answered from the key table by
 *       one auto-commit read; the key is one its executor handled lately (a repeat it does not
 *       remember is answered by its claim: two round trips, nothing written);
 *   <li>{@link #barePkRead} (d): a primary-key SELECT of one payment row;
 *   <li>{@link #naiveGuardNewKey}: the hand-rolled guard of {@link RepeatBenchmark}: {@code INSERT
 *       ... ON CONFLICT DO NOTHING} of the key, the same insert, COMMIT; nothing stored (so it
 *       cannot replay a result).
 * </ul>
 *
 * On MariaDB the statement of (b) runs as a callback (no string of several statements in one round
 * trip there): a round trip per statement, as (b') has.
 *
 * <p>The ratios b/a and c/d are the executor's overhead (b1/a, b2/a and b'/a that of the callback
 * forms, for information); see docs/benchmarks.md. Run with {@code java
 * -jar idem-benchmarks/target/benchmarks.jar ExecutorBenchmark -t 8 -rf json}.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(8)
@Fork(1)
@Warmup(iterations = 2, time = 5)
@Measurement(iterations = 3, time = 10)
public class ExecutorBenchmark {
  static final int POOL = 8;
  static final int READ_ROWS = 10_000;
  static final int REPLAY_KEYS = 2_000;
  static final String INSERT = "INSERT INTO payments (request, amount) VALUES (?, ?) RETURNING id";
  static final Table<Record> PAYMENTS = DSL.table(DSL.name("payments"));
  static final Field<String> REQUEST = DSL.field(DSL.name("request"), SQLDataType.CLOB);
  static final Field<Integer> AMOUNT = DSL.field(DSL.name("amount"), SQLDataType.INTEGER);

  /** One database, one pool, one executor, shared by every thread. */
  @State(Scope.Benchmark)
  public static class Shared {
    TestDatabase db;
    HikariDataSource ds;
    IdempotentExecutor executor;
    /**
     * The executor of (c) alone. Each executor remembers the keys it handled lately in a fixed-size
     * table; sharing (b)'s and (b')'s would let their new keys push the 2,000 replay keys out of it
     * in InterleavedRatios, and a forgotten key is replayed through the claim (three round trips).
     */
    IdempotentExecutor replayer;
    String run;
    BenchSql sql;

    @Setup(Level.Trial)
    public void start() throws Exception {
      db = TestDatabase.newDatabase("bench_executor");
      sql = BenchSql.of(db);
      ds = db.warmDataSource(POOL);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      executor = idem.executor().build();
      replayer = idem.executor().build();
      run = UUID.randomUUID().toString().substring(0, 8);
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute(sql.effectTable("payments", "request"));
        st.execute(sql.seedPayments(READ_ROWS));
        st.execute(sql.naiveKeysTable());
      }
      for (int i = 0; i < REPLAY_KEYS; i++) {
        String request = "replay-" + i;
        replayer.execute(replayKey(i), Fingerprint.EMPTY, Codec.utf8(), tx -> pay(tx.connection(), request));
      }
      if (sql.mariadb()) {
        Settle.database(ds);
      } else {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
          st.execute("VACUUM ANALYZE");
        }
      }
    }

    /** Before every iteration: no method pays for the writes of the one run before it. */
    @Setup(Level.Iteration)
    public void settle() throws SQLException {
      Settle.tables(ds, "payments, " + sql.idem("idem_keys") + ", naive_keys");
    }

    IdempotencyKey replayKey(int i) {
      return IdempotencyKey.of("bench/replay", "key-" + i);
    }

    @TearDown(Level.Trial)
    public void stop() {
      ds.close();
      db.close();
    }
  }


  static String pay(Connection c, String request) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(INSERT)) {
      ps.setString(1, request);
      ps.setInt(2, 100);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return "payment-" + rs.getLong(1);
      }
    }
  }

  /** (a) One transaction inserting one payment row. */
  @Benchmark
  public String bareEffect(Shared s, ThreadKeys l) throws SQLException {
    return BareTransaction.run(s.ds, c -> pay(c, l.newKey()));
  }

  /**
   * (b) The same effect through the executor, with a new key each time: the insert as a
   * statement, sent with the claim (first) and COMMIT in one round trip. Nothing is stored for
   * replay.
   */
  @Benchmark
  public Execution<Void> executorNewKey(Shared s, ThreadKeys l) {
    String request = l.newKey();
    return s.executor.execute(IdempotencyKey.of("bench/new", request), Fingerprint.EMPTY,
        DSL.insertInto(PAYMENTS, REQUEST, AMOUNT).values(request, 100));
  }

  /** (b1) The same effect as a callback, its result stored: claim, effect, result with COMMIT. */
  @Benchmark
  public Execution<String> executorNewKeyCallback(Shared s, ThreadKeys l) throws SQLException {
    String request = l.newKey();
    return s.executor.execute(IdempotencyKey.of("bench/callback", request), Fingerprint.EMPTY, Codec.utf8(),
        (Tx tx) -> pay(tx.connection(), request));
  }

  /** (b') As (b1), with a codec that stores nothing: no result UPDATE at all. */
  @Benchmark
  public Execution<Object> executorNewKeyNoResult(Shared s, ThreadKeys l) throws SQLException {
    String request = l.newKey();
    return s.executor.execute(IdempotencyKey.of("bench/none", request), Fingerprint.EMPTY, Codec.none(),
        (Tx tx) -> pay(tx.connection(), request));
  }

  /** (c) A repeat of a completed key: the stored result, replayed. */
  @Benchmark
  public String executorReplay(Shared s, ThreadKeys l) throws SQLException {
    Execution<String> e = s.replayer.execute(s.replayKey(l.nextIndex(REPLAY_KEYS)), Fingerprint.EMPTY, Codec.utf8(),
        tx -> {
          throw new IllegalStateException("a replay must not run the effect");
        });
    return e.value();
  }

  /** (d) A primary-key SELECT of one payment row. */
  @Benchmark
  public String barePkRead(Shared s, ThreadKeys l) throws SQLException {
    try (Connection c = s.ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT request, amount FROM payments WHERE id = ?")) {
      ps.setLong(1, 1 + l.nextIndex(READ_ROWS));
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  /** The hand-rolled guard for a new key, nothing stored: see {@link RepeatBenchmark#naiveGuard}. */
  @Benchmark
  public boolean naiveGuardNewKey(Shared s, ThreadKeys l) throws SQLException {
    String key = l.newKey();
    try (Connection c = s.ds.getConnection()) {
      return RepeatBenchmark.naiveGuard(c, s.sql, key, key);
    }
  }
}
