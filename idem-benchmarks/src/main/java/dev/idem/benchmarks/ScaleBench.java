package dev.idem.benchmarks;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import dev.idem.testing.TimedKeys;
import dev.idem.window.DedupeWindow;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * Remembering at scale (docs/scale.md), the two layouts side by side, each in a fresh database:
 *
 * <ul>
 *   <li>{@code size}: bytes per key row and per inbox row (table, indexes, free-space and
 *       visibility maps: {@code pg_total_relation_size}, summed over partitions) after N real
 *       executor calls with a small stored result and N inbox receives; keys are UUIDv7 (the
 *       partitioned layout's kind) and, in the default layout, random UUIDv4 too; once with one
 *       VACUUM at the end, once with a VACUUM after every tenth of the calls (see {@link #size}).
 *   <li>{@code scale}: throughput of new keys and of repeats as the key table grows from 0 to 1M
 *       to 10M rows (rows loaded server-side, INSERT ... SELECT generate_series; v7 keys spread
 *       over two past days, the first 2M of them past their window), each phase a few seconds on
 *       2 threads, the layouts interleaved; then the expiry of the day of 2M expired keys: batched
 *       DELETE ({@code executor.expire()}, 1000 a batch) against dropping its partition ({@code
 *       maintainPartitions()}), with the time, the WAL written ({@code pg_current_wal_lsn()}
 *       before and after) and the dead tuples left ({@code pg_stat_user_tables}).
 * </ul>
 *
 * <pre>java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.ScaleBench size [N=100000]
 * java -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.ScaleBench scale [rows=10000000] [seconds=5]</pre>
 */
public final class ScaleBench {
  static final int THREADS = 2;
  static final Fingerprint FP = Fingerprint.of("pay");
  static final String RESULT = "pay_o1";

  private ScaleBench() {}

  public static void main(String[] args) throws Exception {
    String mode = args.length > 0 ? args[0] : "size";
    if (mode.equals("size")) {
      size(args.length > 1 ? Integer.parseInt(args[1]) : 100_000);
    } else {
      scale(args.length > 1 ? Long.parseLong(args[1]) : 10_000_000L, args.length > 2 ? Integer.parseInt(args[2]) : 5);
    }
  }

  /** One database in one layout, with idem on it. */
  record Db(String name, TestDatabase db, DataSource ds, Idem idem, IdempotentExecutor executor) implements AutoCloseable {
    static Db open(String name, IdemFlyway.Layout layout) {
      TestDatabase db = TestPostgres.newDatabase("scale_" + name);
      DataSource ds = db.dataSource(THREADS + 2);
      IdemFlyway.migrate(ds, "idem", layout);
      Idem idem = Idem.builder(ds).build();
      return new Db(name, db, ds, idem, idem.executor().window(DedupeWindow.of(Duration.ofDays(7))).expiryBatches(1000, 1_000_000).build());
    }

    long count(String sql) {
      return db.count(sql);
    }

    void sql(String sql) {
      db.execute(sql);
    }

    /** Bytes of {@code table} (and its partitions), indexes and maps included, and of its indexes alone. */
    long[] bytes(String table) {
      String parts = "(SELECT 'idem." + table + "'::regclass AS relid UNION SELECT relid FROM pg_partition_tree('idem." + table + "')) AS p";
      return new long[] {
        count("SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM " + parts),
        count("SELECT coalesce(sum(pg_indexes_size(relid)), 0) FROM " + parts)};
    }

    @Override
    public void close() {
      db.close();
    }
  }


  // ---------------------------------------------------------------------------------------------

  /**
   * Bytes per row, measured two ways in fresh databases: {@code once}, N calls and then one
   * VACUUM; {@code running}, the same N calls with a VACUUM after every tenth of them, as
   * autovacuum runs on a busy table, so rows written later fill the space earlier ones freed
   * (the result's update leaves each local key's first version dead until pruning or VACUUM).
   */
  static void size(int n) throws Exception {
    System.out.printf("bytes per row after %,d calls (table + indexes + maps; indexes alone)%n", n);
    for (String[] run : new String[][] {{"default", "v7"}, {"default", "v4"}, {"partitioned", "v7"}}) {
      IdemFlyway.Layout layout = run[0].equals("default") ? IdemFlyway.Layout.DEFAULT : IdemFlyway.Layout.PARTITIONED;
      boolean v7 = run[1].equals("v7");
      for (int rounds : new int[] {1, 10}) {
        try (Db d = Db.open(run[0] + "_" + run[1] + "_" + rounds, layout)) {
          Inbox inbox = d.idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(7))).build();
          for (int round = 0; round < rounds; round++) {
            parallel(n / rounds, i -> {
              String value = v7 ? TimedKeys.uuidV7(Instant.now()) : java.util.UUID.randomUUID().toString();
              d.executor.execute(IdempotencyKey.of("shop-42", value), FP, Codec.utf8(), tx -> "pay_o" + (i % 1000));
              if (v7) {
                inbox.receive(TimedKeys.uuidV7(Instant.now()), tx -> { });
              }
            });
            d.sql("VACUUM ANALYZE idem.idem_keys");
            d.sql("VACUUM ANALYZE idem.idem_inbox");
          }
          long rows = n / rounds * (long) rounds;
          String how = rounds == 1 ? "once" : "running";
          long[] keys = d.bytes("idem_keys");
          System.out.printf(Locale.ROOT, "%-12s %s %-8s keys:  %6.1f B/row (indexes %5.1f)%n", run[0], run[1], how,
              keys[0] / (double) rows, keys[1] / (double) rows);
          if (v7) {
            long[] ids = d.bytes("idem_inbox");
            System.out.printf(Locale.ROOT, "%-12s %s %-8s inbox: %6.1f B/row (indexes %5.1f)%n", run[0], run[1], how,
                ids[0] / (double) rows, ids[1] / (double) rows);
          }
        }
      }
    }
  }

  interface Call {
    void run(long i) throws Exception;
  }

  /** {@code n} calls on {@value #THREADS} threads. */
  static void parallel(long n, Call call) throws Exception {
    AtomicLong next = new AtomicLong();
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        done.add(pool.submit(() -> {
          for (long i = next.getAndIncrement(); i < n; i = next.getAndIncrement()) {
            call.run(i);
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /** Calls per second on {@value #THREADS} threads for {@code seconds}. */
  static double rate(int seconds, Call call) throws Exception {
    AtomicLong calls = new AtomicLong();
    long end = System.nanoTime() + seconds * 1_000_000_000L;
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    long start = System.nanoTime();
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        done.add(pool.submit(() -> {
          while (System.nanoTime() < end) {
            call.run(calls.getAndIncrement());
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
    return calls.get() / ((System.nanoTime() - start) / 1e9);
  }

  // ---------------------------------------------------------------------------------------------

  static void scale(long rows, int seconds) throws Exception {
    LocalDate today = LocalDate.now(ZoneOffset.UTC);
    LocalDate expiredDay = today.minusDays(3);
    LocalDate liveDay = today.minusDays(2);
    long expired = Math.min(2_000_000L, rows / 5);
    try (Db def = Db.open("default", IdemFlyway.Layout.DEFAULT); Db part = Db.open("partitioned", IdemFlyway.Layout.PARTITIONED)) {
      for (LocalDate day : List.of(expiredDay, liveDay)) {
        part.sql(TimedKeys.keyPartitionOf(day));
      }
      System.out.printf("%-12s %10s %12s %12s%n", "layout", "rows", "new keys/s", "repeats/s");
      long loaded = 0;
      for (long target : new long[] {0, rows / 10, rows}) {
        // the first rows loaded (up to `expired`) are a day of keys past their window; the rest live
        long expiredPart = Math.max(0, Math.min(expired, target) - Math.min(expired, loaded));
        long livePart = (target - loaded) - expiredPart;
        for (Db d : List.of(def, part)) {
          load(d, expiredDay, loaded, expiredPart, false);
          load(d, liveDay, loaded + expiredPart, livePart, true);
          d.sql("VACUUM ANALYZE idem.idem_keys");
        }
        loaded = target;
        double[][] r = new double[2][2];
        for (int round = 0; round < 2; round++) {
          for (int i = 0; i < 2; i++) {
            Db d = i == 0 ? def : part;
            r[i][0] += rate(seconds, n -> d.executor.execute(IdempotencyKey.of("shop-42", TimedKeys.uuidV7(Instant.now())), FP, Codec.utf8(),
                tx -> RESULT)) / 2;
          }
          for (int i = 0; i < 2; i++) {
            Db d = i == 0 ? def : part;
            List<String> sample = repeatable(d);
            r[i][1] += sample.isEmpty() ? 0 : rate(seconds, n -> {
              var e = d.executor.execute(IdempotencyKey.of("shop-42", sample.get((int) (n % sample.size()))), FP,
                  Codec.utf8(), tx -> RESULT);
              if (!e.replayed()) {
                throw new IllegalStateException("not a repeat: " + e);
              }
            }) / 2;
          }
        }
        for (int i = 0; i < 2; i++) {
          System.out.printf(Locale.ROOT, "%-12s %,10d %12.0f %12.0f%n", i == 0 ? "default" : "partitioned", target,
              r[i][0], r[i][1]);
        }
      }
      System.out.printf("%nexpiry of a day of %,d keys past their window%n", expired);
      System.out.printf("%-12s %-28s %10s %12s %12s %10s%n", "layout", "how", "seconds", "WAL bytes", "dead tuples", "rows gone");
      def.sql("ALTER TABLE idem.idem_keys SET (autovacuum_enabled = false)"); // count the dead tuples a delete leaves
      expire(def, "batched DELETE (expire())", () -> def.executor.expire());
      // kept 2 days after their day: the live day (ended yesterday) is not yet a candidate to scan
      expire(part, "DROP partition", () -> part.idem.operations().maintainPartitions(Duration.ofDays(7), Duration.ofDays(2)).dropped());
    }
  }

  /** Up to 10,000 live keys of {@code d}'s table, repeated in a loop. */
  static List<String> repeatable(Db d) throws Exception {
    List<String> keys = new ArrayList<>();
    try (var c = d.db.connect(); var st = c.createStatement();
        var rs = st.executeQuery("SELECT key FROM idem.idem_keys WHERE expires_at > now() + interval '1 day' LIMIT 10000")) {
      while (rs.next()) {
        keys.add(rs.getString(1));
      }
    }
    return keys;
  }

  /**
   * Loads {@code n} completed key rows server-side, as a local claim writes them (16-byte
   * fingerprint of {@link #FP}, a small result, no completed_at), with UUIDv7 keys spread over
   * {@code day}; past their window, or within it.
   */
  static void load(Db d, LocalDate day, long from, long n, boolean live) {
    if (n <= 0) {
      return;
    }
    long dayMs = day.atStartOfDay().toEpochSecond(ZoneOffset.UTC) * 1000;
    String fp = FP.hex().substring(0, 32);
    long started = System.nanoTime();
    // spread over the day: key i at dayMs + (i * 86,399,000 / total) ms, in batches of 1M rows
    for (long lo = from; lo < from + n; lo += 1_000_000) {
      long hi = Math.min(from + n, lo + 1_000_000);
      d.sql("INSERT INTO idem.idem_keys (created_at, expires_at, scope, key, fingerprint, state, result)"
          + " SELECT t, t + " + (live ? "interval '7 days'" : "interval '1 hour'") + ", 'shop-42', k,"
          + " decode('" + fp + "', 'hex'), 'C', convert_to('pay_o' || (i % 1000), 'UTF8')"
          + " FROM (SELECT i, to_timestamp(ms / 1000.0) AS t,"
          + "   lpad(to_hex(ms), 12, '0') AS h, md5(i::text) AS m FROM (SELECT i, " + dayMs + " + (i % 10000000) * 8 AS ms"
          + "   FROM generate_series(" + lo + ", " + (hi - 1) + ") AS i) AS g) AS x,"
          + " LATERAL (SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(m, 1, 3) || '-8' || substr(m, 4, 3)"
          + "   || '-' || substr(m, 7, 12) AS k) AS key");
    }
    System.err.printf(Locale.ROOT, "  loaded %,d %s rows into %s in %.0f s%n", n, live ? "live" : "expired", d.name,
        (System.nanoTime() - started) / 1e9);
  }

  interface Expire {
    long run() throws Exception;
  }

  static void expire(Db d, String how, Expire expire) throws Exception {
    long before = d.count("SELECT count(*) FROM idem.idem_keys");
    String lsn = walLsn(d);
    long started = System.nanoTime();
    expire.run();
    double secs = (System.nanoTime() - started) / 1e9;
    long wal = d.count("SELECT pg_current_wal_lsn() - '" + lsn + "'::pg_lsn");
    try (var c = d.db.connect(); var st = c.createStatement()) {
      st.execute("SELECT pg_stat_force_next_flush()");
    }
    d.sql("SELECT pg_stat_clear_snapshot()");
    long dead = d.count("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'idem'"
        + " AND relname LIKE 'idem_keys%'");
    long gone = before - d.count("SELECT count(*) FROM idem.idem_keys");
    System.out.printf(Locale.ROOT, "%-12s %-28s %10.1f %,12d %,12d %,10d%n", d.name, how, secs, wal, dead, gone);
  }

  static String walLsn(Db d) throws Exception {
    try (var c = d.db.connect(); var st = c.createStatement(); var rs = st.executeQuery("SELECT pg_current_wal_lsn()::text")) {
      rs.next();
      return rs.getString(1);
    }
  }
}
