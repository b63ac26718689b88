package dev.idem.benchmarks;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.testing.TestDatabase;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
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
 * The inbox's cost: {@link #inboxReceive} applies a new message (claim + one INSERT, one
 * transaction, the claim first) through {@link Inbox#receive}; {@link #inboxReceiveStatement} gives the INSERT as a jOOQ statement
 * ({@link Inbox#receive(String, org.jooq.Query...)}: claim, insert and COMMIT in one round trip,
 * the claim first); {@link #bareEffect} does the same INSERT in a bare JDBC transaction.
 * The target is inbox / bare >= 0.8. On PostgreSQL, or MariaDB, as {@link TestDatabase#newDatabase}
 * picks it (IDEM_JDBC_URL, or IDEM_TEST_DATABASE=mariadb); on MariaDB the statements form runs as a
 * callback (no string of several statements in one round trip there).
 *
 * <p>Run: {@code java -jar idem-benchmarks/target/benchmarks.jar InboxBenchmark -t 8}.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(8)
@Fork(1)
@Warmup(iterations = 2, time = 5)
@Measurement(iterations = 3, time = 10)
public class InboxBenchmark {
  static final String INSERT = "INSERT INTO charges (message_id, amount) VALUES (?, ?)";
  static final Table<Record> CHARGES = DSL.table(DSL.name("charges"));
  static final Field<String> MESSAGE_ID = DSL.field(DSL.name("message_id"), SQLDataType.CLOB);
  static final Field<Integer> AMOUNT = DSL.field(DSL.name("amount"), SQLDataType.INTEGER);

  @State(Scope.Benchmark)
  public static class Shared {
    TestDatabase db;
    HikariDataSource ds;
    Inbox inbox;
    BenchSql sql;

    @Setup(Level.Trial)
    public void start() throws SQLException {
      db = TestDatabase.newDatabase("bench_inbox");
      sql = BenchSql.of(db);
      ds = db.warmDataSource(8);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      inbox = idem.inbox("bench").window(DedupeWindow.of(Duration.ofDays(8))).build();
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute(sql.effectTable("charges", "message_id"));
      }
    }

    /** Before every iteration: no method pays for the writes of the one run before it. */
    @Setup(Level.Iteration)
    public void settle() throws SQLException {
      Settle.tables(ds, "charges, " + sql.idem("idem_inbox"));
    }

    @TearDown(Level.Trial)
    public void stop() {
      ds.close();
      db.close();
    }
  }


  static void charge(Connection c, String messageId) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(INSERT)) {
      ps.setString(1, messageId);
      ps.setInt(2, 10);
      ps.executeUpdate();
    }
  }

  @Benchmark
  public void bareEffect(Shared s, ThreadKeys l) throws SQLException {
    BareTransaction.run(s.ds, c -> {
      charge(c, l.newKey());
      return null;
    });
  }

  @Benchmark
  public Execution<Void> inboxReceive(Shared s, ThreadKeys l) throws SQLException {
    String id = l.newKey();
    return s.inbox.receive(id, tx -> charge(tx.connection(), id));
  }

  /** The same INSERT as a statement: the claim, the insert and COMMIT in one round trip, the claim first. */
  @Benchmark
  public Execution<Void> inboxReceiveStatement(Shared s, ThreadKeys l) {
    String id = l.newKey();
    return s.inbox.receive(id, DSL.insertInto(CHARGES, MESSAGE_ID, AMOUNT).values(id, 10));
  }

}
