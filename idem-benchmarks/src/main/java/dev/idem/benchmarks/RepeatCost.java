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
import dev.idem.testing.TestPostgres;
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
 * What a recognised repeat leaves behind in PostgreSQL: for N repeats of ids (keys) already
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
 * <pre>java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.RepeatCost [N]</pre>
 */
public final class RepeatCost {
  static final int POOL = 4;

  private RepeatCost() {}

  /** Cumulative counters at one moment. */
  record Counters(long ins, long upd, long del, long dead, long commits, long rollbacks, long xid, Map<String, long[]> perTable) {}

  /** One guard's N operations. */
  @FunctionalInterface
  interface Guard {
    void repeat(int i) throws Exception;
  }

  public static void main(String[] args) throws Exception {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
    TestDatabase db = TestPostgres.newDatabase("repeat_cost");
    HikariDataSource ds = db.warmDataSource(POOL);
    try (Connection admin = DriverManager.getConnection(db.jdbcUrl())) {
      admin.setAutoCommit(true);
      int serverVersion = admin.getMetaData().getDatabaseMajorVersion();
      Idem writer = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      RepeatBenchmark.createTables(ds);
      try (Statement st = admin.createStatement()) {
        st.execute("DO $$ DECLARE t record; BEGIN FOR t IN SELECT schemaname, relname FROM pg_stat_user_tables LOOP "
            + "EXECUTE format('ALTER TABLE %I.%I SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', "
            + "t.schemaname, t.relname); END LOOP; END $$");
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
          check(RepeatBenchmark.naiveGuard(c, "m-" + i, null), "naive set-up");
        }
      });
      try (Statement st = admin.createStatement()) {
        st.execute("VACUUM ANALYZE");
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
      guards.put("hand-rolled INSERT ON CONFLICT DO NOTHING, tx", i -> {
        try (Connection c = peers.getConnection()) {
          check(!RepeatBenchmark.naiveGuard(c, "m-" + i, null), "naive repeat");
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

      System.out.printf(Locale.ROOT, "RepeatCost: %d repeats per guard, PostgreSQL %d (%s), database %s%n", n, serverVersion,
          TestPostgres.server().kind(), db.name());
      System.out.printf(Locale.ROOT, "%-50s %8s %8s %8s %8s %8s %8s %8s %8s%n", "per repeat", "dead", "ins", "upd", "del",
          "commit", "rollback", "xids", "trips");
      double[] idle = null;
      List<String> failed = new ArrayList<>();
      for (Map.Entry<String, Guard> g : guards.entrySet()) {
        Counters before = read(admin, ds, serverVersion);
        long trips = counted.count() + peers.count();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
          g.getValue().repeat(i);
        }
        long elapsed = System.nanoTime() - t0;
        trips = counted.count() + peers.count() - trips;
        Counters after = read(admin, ds, serverVersion);
        double[] per = {
          (after.dead - before.dead) / (double) n,
          (after.ins - before.ins) / (double) n,
          (after.upd - before.upd) / (double) n,
          (after.del - before.del) / (double) n,
          (after.commits - before.commits) / (double) n,
          (after.rollbacks - before.rollbacks) / (double) n,
          // the "before" txid_current() took one id itself
          (after.xid - before.xid - 1) / (double) n,
        };
        if (idle == null) {
          idle = per.clone();
        } else {
          for (int k = 0; k < per.length; k++) {
            per[k] -= idle[k];
          }
        }
        System.out.printf(Locale.ROOT, "%-50s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f   (%.0f µs per repeat, one thread)%n",
            g.getKey(), per[0], per[1], per[2], per[3], per[4], per[5], per[6], trips / (double) n, elapsed / 1000.0 / n);
        for (Map.Entry<String, long[]> t : after.perTable.entrySet()) {
          long[] b = before.perTable.getOrDefault(t.getKey(), new long[4]);
          long[] a = t.getValue();
          if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] != b[3]) {
            System.out.printf(Locale.ROOT, "    %-46s dead %+d, ins %+d, upd %+d, del %+d%n", t.getKey(), a[3] - b[3], a[0] - b[0],
                a[1] - b[1], a[2] - b[2]);
          }
        }
        // Net of the idle row, a figure can come out below zero when something else on the server took
        // transaction ids during the idle measurement (xids are cluster-wide): only a cost counts.
        if (g.getKey().startsWith("idem") && (per[0] > 0.0005 || per[6] > 0.0005)) {
          failed.add(g.getKey());
        }
      }
      try (Statement st = admin.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM repeat_must_not_run")) {
        rs.next();
        System.out.println("statements given with a repeat that ran: " + rs.getLong(1) + " (must be 0)");
      }
      System.out.println(failed.isEmpty()
          ? "target (zero dead tuples and no transaction id per recognised repeat, every idem form): met"
          : "target (zero dead tuples and no transaction id per recognised repeat) not met by: " + String.join("; ", failed));
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
   * Makes every pool connection flush its pending statistics, then reads the database's counters
   * (summed over its tables) and the next transaction id, on {@code admin}.
   */
  static Counters read(Connection admin, HikariDataSource ds, int serverVersion) throws SQLException, InterruptedException {
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
      return new Counters(ins, upd, del, dead, commits, rollbacks, xid, perTable);
    }
  }
}
