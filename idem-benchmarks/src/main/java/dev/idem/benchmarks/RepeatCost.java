package dev.idem.benchmarks;

import dev.idem.flyway.IdemFlyway;
import static dev.idem.benchmarks.RepeatBenchmark.WINDOW;
import static dev.idem.benchmarks.RepeatBenchmark.fingerprint;
import static dev.idem.benchmarks.RepeatBenchmark.mustNotRun;
import static dev.idem.benchmarks.RepeatBenchmark.pay;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.camel.processor.idempotent.jdbc.JdbcMessageIdRepository;
import org.springframework.integration.jdbc.metadata.JdbcMetadataStore;

/**
 * What a recognised repeat leaves behind in the database: for N repeats of ids (keys) already
 * applied, by a guard instance that never saw them ("cold": another replica, a restart), the dead
 * tuples, inserted, updated and deleted tuples, commits and rollbacks, and transaction ids
 * consumed, each per repeat. The target is zero dead tuples and no transaction id per recognised
 * repeat. Guards: idem's inbox (callback and statements forms), idem's executor (callback and
 * statements forms), Camel's {@code JdbcMessageIdRepository.add}, Spring Integration's {@code
 * JdbcMetadataStore.putIfAbsent}, a hand-rolled {@code INSERT ... ON CONFLICT DO NOTHING} guard;
 * then idem's warm repeats (the same instances again, which now remember the ids). Round trips
 * per repeat ("trips") are counted on the guards' connections ({@link RoundTrips}).
 *
 * <p>How: one fresh database, autovacuum off on its tables (so nothing resets {@code n_dead_tup}
 * or analyzes mid-run, which would take a transaction id), a pool of {@value #POOL}; before and
 * after each guard's N repeats, every pool connection runs {@code pg_stat_force_next_flush()}
 * (PostgreSQL 15+; before 15 the statistics collector lags, see below), then a separate connection
 * sums {@code pg_stat_user_tables} over the database's tables (idem's, whatever they are named, and
 * the peers') after {@code pg_stat_clear_snapshot()} and reads {@code pg_stat_database}. Transaction
 * ids: {@code txid_current()} before and after on that connection; the difference less one (the
 * first call's own) is what the repeats consumed, cluster-wide: run it with nothing else writing to
 * the server. An idle row (no repeats) shows what the measurement itself costs; it is subtracted.
 *
 * <p>On MariaDB (as {@link TestDatabase#newDatabase} picks it: {@code IDEM_JDBC_URL=jdbc:mariadb:...}
 * or {@code IDEM_TEST_DATABASE=mariadb}), which has neither dead tuples nor per-table statistics
 * of inserts and updates (userstat is off by default and server-wide), the counts are:
 *
 * <ul>
 *   <li>rows written: InnoDB's own count of the rows each table had inserted, updated (a change) or
 *       deleted, {@code information_schema.innodb_sys_tablestats.modified_counter}, summed over the
 *       database's tables, with {@code STATS_AUTO_RECALC=0} on each (so no statistics
 *       recalculation resets it mid-run; the counterpart of autovacuum off). It counts a row an
 *       {@code INSERT IGNORE} did not insert as nothing, an insert rolled back as two;
 *   <li>engine writes asked: the sessions' {@code Handler_write}, {@code Handler_update} and {@code
 *       Handler_delete}, summed over the pool's connections: every row write the server asked of the
 *       engine, an {@code INSERT IGNORE} that met its key and an update that changed nothing
 *       included (so above the rows written);
 *   <li>commits and rollbacks: the sessions' {@code Handler_commit} and {@code Handler_rollback};
 *   <li>transaction ids: {@code Innodb_max_trx_id} after less before, server-wide (InnoDB gives an
 *       id only to a transaction that writes): with other sessions writing to the server it counts
 *       theirs too, so only a quiet server makes it a figure;
 *   <li>statements: the sessions' {@code Questions}, every statement the server was sent on the
 *       pool's connections (the pool's own resets included), beside the trips counted by the driver.
 * </ul>
 *
 * <pre>java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.RepeatCost [N]</pre>
 */
public final class RepeatCost {
  static final int POOL = 4;

  private RepeatCost() {}

  /** Cumulative counters at one moment: the database's, named by {@link Meter#columns}, and per table, by {@link Meter#tableColumns}. */
  record Counters(long[] totals, Map<String, long[]> perTable) {}

  /** How one database's counters are read. */
  interface Meter {
    /** The names of {@link Counters#totals}, in order. */
    List<String> columns();

    /** The names of a table's counters. */
    List<String> tableColumns();

    /** The indexes of the columns an idem repeat must leave at zero. */
    int[] mustBeZero();

    /** The indexes of the columns that must show the control's one row written per operation. */
    int[] countWrites();

    /** The column whose "before" read took one transaction id itself, or -1. */
    int xidColumn();

    Counters read() throws SQLException, InterruptedException;
  }

  /** One guard's N operations. */
  @FunctionalInterface
  interface Guard {
    void repeat(int i) throws Exception;
  }

  public static void main(String[] args) throws Exception {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
    TestDatabase db = TestDatabase.newDatabase("repeat_cost");
    BenchSql sql = BenchSql.of(db);
    HikariDataSource ds = db.warmDataSource(POOL);
    try (Connection admin = DriverManager.getConnection(db.jdbcUrl())) {
      admin.setAutoCommit(true);
      int serverVersion = admin.getMetaData().getDatabaseMajorVersion();
      String serverName = admin.getMetaData().getDatabaseProductVersion();
      Idem writer = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      RepeatBenchmark.createTables(ds, sql);
      Meter meter = sql.mariadb() ? new MariaDbMeter(admin, ds) : new PostgresMeter(admin, ds, serverVersion);
      try (Statement st = admin.createStatement()) {
        if (sql.mariadb()) {
          for (String table : MariaDbMeter.tables(admin)) {
            st.execute("ALTER TABLE `" + table + "` STATS_AUTO_RECALC = 0");
          }
        } else {
          st.execute("DO $$ DECLARE t record; BEGIN FOR t IN SELECT schemaname, relname FROM pg_stat_user_tables LOOP "
              + "EXECUTE format('ALTER TABLE %I.%I SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', "
              + "t.schemaname, t.relname); END LOOP; END $$");
        }
      }

      // Applied by the writer (another instance), N ids per idem form; the peers' ids through the peers.
      Inbox writerInbox = writer.inbox(RepeatBenchmark.CONSUMER).window(WINDOW).build();
      IdempotentExecutor writerExecutor = writer.executor().window(WINDOW).build();
      RoundTrips peers = new RoundTrips(ds);
      JdbcMessageIdRepository camel = RepeatBenchmark.camelRepository(peers);
      JdbcMetadataStore si = RepeatBenchmark.springIntegrationStore(peers);
      RepeatBenchmark.parallel(n, i -> {
        for (String id : List.of("cb-" + i, "st-" + i)) {
          writerInbox.receive(id, tx -> {
            pay(tx.connection(), "inbox-" + id);
          });
        }
        for (String key : List.of("kc-" + i, "ks-" + i)) {
          writerExecutor.execute(IdempotencyKey.of(RepeatBenchmark.SCOPE, key), fingerprint(key), Codec.utf8(),
              tx -> pay(tx.connection(), key));
        }
        check(camel.add("m-" + i), "camel set-up");
        check(si.putIfAbsent("m-" + i, "1") == null, "spring integration set-up");
        try (Connection c = ds.getConnection()) {
          check(RepeatBenchmark.naiveGuard(c, sql, "m-" + i, null), "naive set-up");
        }
      });
      if (sql.mariadb()) {
        Settle.database(ds); // ANALYZE TABLE (which resets InnoDB's modified counters: before the first read) and purge
      } else {
        try (Statement st = admin.createStatement()) {
          st.execute("VACUUM ANALYZE");
        }
      }

      // The instances that never saw the ids: another Idem on the same pool, its round trips counted
      // (and the peers' and the hand-rolled guard's, below).
      RoundTrips counted = new RoundTrips(ds);
      Idem other = Idem.builder(counted).build();
      Inbox coldInbox = other.inbox(RepeatBenchmark.CONSUMER).window(WINDOW).build();
      Inbox coldInboxStatements = other.inbox(RepeatBenchmark.CONSUMER).window(WINDOW).build();
      IdempotentExecutor coldExecutor = other.executor().window(WINDOW).build();
      IdempotentExecutor coldExecutorStatements = other.executor().window(WINDOW).build();

      Map<String, Guard> guards = new LinkedHashMap<>();
      guards.put("idle (no repeats: the measurement's own cost)", i -> {});
      guards.put("idem inbox, callback, cold", i -> {
        String id = "cb-" + i;
        coldInbox.receive(id, tx -> {
          throw new IllegalStateException("a repeat ran its effect: " + id);
        });
      });
      guards.put("idem inbox, statements, cold", i -> coldInboxStatements.receive("st-" + i, mustNotRun("st-" + i)));
      guards.put("idem executor, callback, cold", i -> {
        String key = "kc-" + i;
        coldExecutor.execute(IdempotencyKey.of(RepeatBenchmark.SCOPE, key), fingerprint(key), Codec.utf8(), tx -> {
          throw new IllegalStateException("a repeat ran its effect: " + key);
        });
      });
      guards.put("idem executor, statements, cold", i -> {
        String key = "ks-" + i;
        coldExecutorStatements.execute(IdempotencyKey.of(RepeatBenchmark.SCOPE, key), fingerprint(key), mustNotRun(key));
      });
      guards.put("camel JdbcMessageIdRepository.add", i -> check(!camel.add("m-" + i), "camel repeat"));
      guards.put("spring integration JdbcMetadataStore.putIfAbsent", i -> check(si.putIfAbsent("m-" + i, "1") != null, "si repeat"));
      guards.put(sql.mariadb() ? "hand-rolled INSERT IGNORE, tx" : "hand-rolled INSERT ON CONFLICT DO NOTHING, tx", i -> {
        try (Connection c = peers.getConnection()) {
          check(!RepeatBenchmark.naiveGuard(c, sql, "m-" + i, null), "naive repeat");
        }
      });
      // The same instances again: they remember the ids now.
      guards.put("idem inbox, callback, warm", i -> {
        String id = "cb-" + i;
        coldInbox.receive(id, tx -> {
          throw new IllegalStateException("a repeat ran its effect: " + id);
        });
      });
      guards.put("idem executor, callback, warm", i -> {
        String key = "kc-" + i;
        coldExecutor.execute(IdempotencyKey.of(RepeatBenchmark.SCOPE, key), fingerprint(key), Codec.utf8(), tx -> {
          throw new IllegalStateException("a repeat ran its effect: " + key);
        });
      });
      // The control: one row written per operation, which the counters must show (a counter that
      // stays at zero whatever happens would "meet" the target too).
      guards.put("control: a bare transaction inserting one row", i -> BareTransaction.run(peers, c -> pay(c, "control-" + i)));

      System.out.printf(Locale.ROOT, "RepeatCost: %d repeats per guard, %s %s (%s), database %s%n", n, sql, serverName,
          db.kind(), db.name());
      StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-50s", "per repeat"));
      for (String column : meter.columns()) {
        header.append(String.format(Locale.ROOT, " %8s", column));
      }
      System.out.println(header.append(String.format(Locale.ROOT, " %8s", "trips")));
      double[] idle = null;
      List<String> failed = new ArrayList<>();
      for (Map.Entry<String, Guard> g : guards.entrySet()) {
        Counters before = meter.read();
        long trips = counted.count() + peers.count();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
          g.getValue().repeat(i);
        }
        long elapsed = System.nanoTime() - t0;
        trips = counted.count() + peers.count() - trips;
        Counters after = meter.read();
        double[] per = new double[before.totals().length];
        for (int k = 0; k < per.length; k++) {
          // on PostgreSQL the "before" txid_current() took one id itself
          per[k] = (after.totals()[k] - before.totals()[k] - (k == meter.xidColumn() ? 1 : 0)) / (double) n;
        }
        if (idle == null) {
          idle = per.clone();
        } else {
          for (int k = 0; k < per.length; k++) {
            per[k] -= idle[k];
          }
        }
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-50s", g.getKey()));
        for (double v : per) {
          line.append(String.format(Locale.ROOT, " %8.3f", v));
        }
        System.out.println(line.append(String.format(Locale.ROOT, " %8.3f   (%.0f µs per repeat, one thread)", trips / (double) n,
            elapsed / 1000.0 / n)));
        List<String> names = meter.tableColumns();
        for (Map.Entry<String, long[]> t : after.perTable().entrySet()) {
          long[] b = before.perTable().getOrDefault(t.getKey(), new long[names.size()]);
          long[] a = t.getValue();
          if (!java.util.Arrays.equals(a, b)) {
            StringBuilder changed = new StringBuilder(String.format(Locale.ROOT, "    %-46s", t.getKey()));
            for (int k = 0; k < names.size(); k++) {
              changed.append(String.format(Locale.ROOT, "%s %s %+d", k == 0 ? "" : ",", names.get(k), a[k] - b[k]));
            }
            System.out.println(changed);
          }
        }
        // Net of the idle row, a figure can come out below zero when something else on the server took
        // transaction ids during the idle measurement (xids are cluster-wide): only a cost counts.
        if (g.getKey().startsWith("idem") && java.util.Arrays.stream(meter.mustBeZero()).anyMatch(k -> per[k] > 0.0005)) {
          failed.add(g.getKey());
        }
        if (g.getKey().startsWith("control") && java.util.Arrays.stream(meter.countWrites()).anyMatch(k -> per[k] < 0.9995)) {
          failed.add(g.getKey() + " (its writes went uncounted: the counters cannot be trusted)");
        }
      }
      try (Statement st = admin.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM repeat_must_not_run")) {
        rs.next();
        System.out.println("statements given with a repeat that ran: " + rs.getLong(1) + " (must be 0)");
      }
      String target = sql.mariadb() ? "zero rows written per recognised repeat" : "zero dead tuples and no transaction id per recognised repeat";
      System.out.println(failed.isEmpty()
          ? "target (" + target + ", every idem form): met"
          : "target (" + target + ") not met by: " + String.join("; ", failed));
      camel.stop();
      si.stop();
    } finally {
      ds.close();
      db.close();
    }
  }

  static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException(what + ": unexpected answer");
    }
  }

  /**
   * PostgreSQL: makes every pool connection flush its pending statistics, then reads the database's
   * counters (summed over its tables) and the next transaction id, on {@code admin}.
   */
  record PostgresMeter(Connection admin, HikariDataSource ds, int serverVersion) implements Meter {
    @Override
    public List<String> columns() {
      return List.of("dead", "ins", "upd", "del", "commit", "rollback", "xids");
    }

    @Override
    public List<String> tableColumns() {
      return List.of("ins", "upd", "del", "dead");
    }

    @Override
    public int[] mustBeZero() {
      return new int[] {0, 6};
    }

    @Override
    public int[] countWrites() {
      return new int[] {1, 6};
    }

    @Override
    public int xidColumn() {
      return 6;
    }

    @Override
    public Counters read() throws SQLException, InterruptedException {
      if (serverVersion >= 15) {
        List<Connection> all = new ArrayList<>();
        try {
          for (int i = 0; i < POOL; i++) {
            all.add(ds.getConnection());
          }
          for (Connection c : all) {
            try (Statement st = c.createStatement()) {
              st.execute("SELECT pg_stat_force_next_flush()");
            }
          }
        } finally {
          for (Connection c : all) {
            c.close();
          }
        }
        Thread.sleep(200);
      } else {
        Thread.sleep(1500); // the collector sends at most every 500 ms
      }
      try (Statement st = admin.createStatement()) {
        if (serverVersion >= 15) {
          st.execute("SELECT pg_stat_force_next_flush()"); // this connection's own counts, at its next idle
        }
        st.execute("SELECT pg_stat_clear_snapshot()");
        Map<String, long[]> perTable = new LinkedHashMap<>();
        long ins = 0;
        long upd = 0;
        long del = 0;
        long dead = 0;
        try (ResultSet rs = st.executeQuery("SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_del, n_dead_tup "
            + "FROM pg_stat_user_tables ORDER BY 1")) {
          while (rs.next()) {
            long[] v = {rs.getLong(2), rs.getLong(3), rs.getLong(4), rs.getLong(5)};
            perTable.put(rs.getString(1), v);
            ins += v[0];
            upd += v[1];
            del += v[2];
            dead += v[3];
          }
        }
        long commits;
        long rollbacks;
        try (ResultSet rs = st.executeQuery("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()")) {
          rs.next();
          commits = rs.getLong(1);
          rollbacks = rs.getLong(2);
        }
        long xid;
        try (ResultSet rs = st.executeQuery("SELECT txid_current()")) {
          rs.next();
          xid = rs.getLong(1);
        }
        return new Counters(new long[] {dead, ins, upd, del, commits, rollbacks, xid}, perTable);
      }
    }
  }

  /**
   * MariaDB: InnoDB's count of rows modified per table of the database (on {@code admin}), the
   * pool's sessions' handler counters and statements (each pool connection reads its own
   * session's: MariaDB shows another session's only through the performance schema, off by
   * default), and the server's next transaction id.
   */
  record MariaDbMeter(Connection admin, HikariDataSource ds) implements Meter {
    /** The sessions' counters read, in the order of {@link #columns} after the first. */
    private static final List<String> SESSION = List.of("HANDLER_WRITE", "HANDLER_UPDATE", "HANDLER_DELETE", "HANDLER_COMMIT",
        "HANDLER_ROLLBACK");

    /** The base tables of {@code admin}'s database. */
    static List<String> tables(Connection admin) throws SQLException {
      List<String> tables = new ArrayList<>();
      try (Statement st = admin.createStatement(); ResultSet rs = st.executeQuery("SELECT table_name FROM information_schema.tables"
          + " WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1")) {
        while (rs.next()) {
          tables.add(rs.getString(1));
        }
      }
      return tables;
    }

    @Override
    public List<String> columns() {
      return List.of("written", "h_write", "h_update", "h_delete", "commit", "rollback", "xids*", "stmts");
    }

    @Override
    public List<String> tableColumns() {
      return List.of("rows written");
    }

    @Override
    public int[] mustBeZero() {
      return new int[] {0};
    }

    @Override
    public int[] countWrites() {
      return new int[] {0};
    }

    @Override
    public int xidColumn() {
      return -1;
    }

    @Override
    public Counters read() throws SQLException {
      long[] totals = new long[columns().size()];
      List<Connection> all = new ArrayList<>();
      try {
        for (int i = 0; i < POOL; i++) {
          all.add(ds.getConnection());
        }
        for (Connection c : all) {
          try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT UPPER(variable_name), variable_value"
              + " FROM information_schema.session_status WHERE variable_name IN ('HANDLER_WRITE', 'HANDLER_UPDATE',"
              + " 'HANDLER_DELETE', 'HANDLER_COMMIT', 'HANDLER_ROLLBACK', 'QUESTIONS')")) {
            while (rs.next()) {
              String name = rs.getString(1);
              int k = name.equals("QUESTIONS") ? totals.length - 1 : 1 + SESSION.indexOf(name);
              totals[k] += rs.getLong(2);
            }
          }
        }
      } finally {
        for (Connection c : all) {
          c.close();
        }
      }
      Map<String, long[]> perTable = new LinkedHashMap<>();
      try (Statement st = admin.createStatement()) {
        // InnoDB names a table database/table; the counter lives while the table is open, and
        // nothing here evicts it (a few tables, the definition cache holds hundreds)
        try (ResultSet rs = st.executeQuery("SELECT SUBSTRING_INDEX(name, '/', -1), modified_counter"
            + " FROM information_schema.innodb_sys_tablestats WHERE name LIKE CONCAT(DATABASE(), '/%') ORDER BY 1")) {
          while (rs.next()) {
            perTable.put(rs.getString(1), new long[] {rs.getLong(2)});
            totals[0] += rs.getLong(2);
          }
        }
        try (ResultSet rs = st.executeQuery("SHOW GLOBAL STATUS LIKE 'Innodb_max_trx_id'")) {
          rs.next();
          totals[6] = rs.getLong(2);
        }
      }
      return new Counters(totals, perTable);
    }
  }
}
