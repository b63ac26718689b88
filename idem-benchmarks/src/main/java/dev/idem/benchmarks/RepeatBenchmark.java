package dev.idem.benchmarks;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.camel.processor.idempotent.jdbc.JdbcMessageIdRepository;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.SQLDialect;
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
import org.springframework.integration.jdbc.metadata.JdbcMetadataStore;

/**
 * What a repeat costs when it reaches an instance that has not seen its key (another replica, a
 * restart, a consumer after a rebalance), against a primary-key read and against the JDBC
 * idempotent stores of Apache Camel ({@code camel-sql}'s {@link JdbcMessageIdRepository}) and of
 * Spring Integration ({@code spring-integration-jdbc}'s {@link JdbcMetadataStore}, whose {@code
 * putIfAbsent} is what the idempotent receiver's {@code MetadataStoreSelector} calls). Every guard
 * runs on the same HikariCP pool and the same database: PostgreSQL, or MariaDB, as {@link
 * TestDatabase#newDatabase} picks it ({@code IDEM_JDBC_URL} naming a {@code jdbc:mariadb:} server,
 * or {@code IDEM_TEST_DATABASE=mariadb}); each guard's tables are made with the DDL it ships for
 * that database ({@link BenchSql}), and the hand-rolled guard is written as a user of that
 * database would write it ({@code INSERT IGNORE} on MariaDB).
 *
 * <p>Repeats ({@value #IDS} ids or keys applied before the clock starts, by another {@link Idem}):
 *
 * <ul>
 *   <li>{@link #barePkRead}: the yardstick, an auto-commit primary-key SELECT of one row;
 *   <li>{@link #inboxRepeatCold}, {@link #inboxRepeatColdStatement}: {@code Inbox.receive} of an id
 *       already applied, callback form and statements form, by an inbox that never saw the id:
 *       each thread walks the ids with an {@code Idem} and an {@code Inbox} of its own, built
 *       anew for every pass over them (so its in-process memory of recent ids never knows the id);
 *   <li>{@link #inboxRepeatWarm}: the same by an inbox that applied the id itself, lately;
 *   <li>{@link #executorReplayCold}, {@link #executorReplayColdStatement}, {@link
 *       #executorReplayWarm}: the same for {@code IdempotentExecutor.execute} of a completed key
 *       (its result stored with {@code Codec.utf8()});
 *   <li>{@link #camelRepeatCold}: {@code JdbcMessageIdRepository.add} of an id already present
 *       (what Camel's idempotent consumer calls, eager); it has no cache, so warm is the same;
 *   <li>{@link #springIntegrationRepeatCold}: {@code JdbcMetadataStore.putIfAbsent} of a key
 *       already present; no cache either, so warm is the same;
 *   <li>{@link #naiveGuardRepeat}: a hand-rolled guard, {@code INSERT ... ON CONFLICT DO NOTHING} of
 *       the id in a transaction, rolled back when it inserted nothing.
 * </ul>
 *
 * <p>New keys (the same payment insert as the effect of each):
 *
 * <ul>
 *   <li>{@link #bareEffect}: a bare JDBC transaction inserting one payment row;
 *   <li>{@link #executorNewKeyStatement}, {@link #inboxNewKeyStatement}: the insert given as a jOOQ
 *       statement (claim, insert and COMMIT in one round trip, nothing stored);
 *   <li>{@link #executorNewKeyCallback}: the insert as a callback, its result stored
 *       ({@code Codec.utf8()}); {@link #inboxNewKeyCallback}: the inbox's callback form;
 *   <li>{@link #naiveGuardNewKey}: the hand-rolled guard: {@code INSERT ... ON CONFLICT DO
 *       NOTHING} of the key, the insert, COMMIT (nothing stored); {@link #naiveGuardNewKeyStored}:
 *       the same guard keeping the fingerprint, the result and an indexed expiry, as a guard that
 *       replays the first result must.
 * </ul>
 *
 * <p>Targets (the issue "repeats from other instances must be cheap"): inboxRepeatCold and
 * executorReplayCold >= 0.45 of barePkRead and >= 1.5x camelRepeatCold and
 * springIntegrationRepeatCold; warm repeats >= 2x the peers; new keys: statements >= 0.8 of
 * bareEffect, callback with stored result >= naiveGuardNewKey. Dead tuples and transaction ids
 * per repeat: {@link RepeatCost}. Only idem's public API is used, so this runs unchanged on a
 * rewritten engine. Run:
 *
 * <pre>java -jar idem-benchmarks/target/benchmarks.jar RepeatBenchmark -f 1 -wi 2 -i 3 -w 5s -r 5s -t 1</pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(1)
@Fork(1)
@Warmup(iterations = 2, time = 5)
@Measurement(iterations = 3, time = 5)
public class RepeatBenchmark {
  /** Connections in the one pool every guard uses. */
  public static final int POOL = 8;
  /** Rows of {@code payments} that {@link #barePkRead} reads. */
  public static final int READ_ROWS = 10_000;
  /** Ids (keys) applied before the clock starts, per guard: a cold reader builds a fresh instance per pass over them. */
  public static final int IDS = 10_000;
  /** Ids (keys) a warm instance applied itself and so remembers. */
  public static final int WARM_IDS = 2_000;
  public static final String CONSUMER = "bench-repeat";
  public static final String SCOPE = "bench/repeat";
  public static final DedupeWindow WINDOW = DedupeWindow.of(Duration.ofDays(1));
  /** Camel's processor name and Spring Integration's region for the benchmark's ids. */
  public static final String PEER_NAME = "bench-repeat";

  /** For the statements given to idem: idem renders them in its own dialect for the database, so any context will do. */
  static final DSLContext SQL = DSL.using(SQLDialect.POSTGRES);
  static final Table<Record> PAYMENTS = DSL.table(DSL.name("payments"));
  static final Field<String> REQUEST = DSL.field(DSL.name("request"), SQLDataType.CLOB);
  static final Field<Integer> AMOUNT = DSL.field(DSL.name("amount"), SQLDataType.INTEGER);
  /** A table a repeat must never write to: the statement given with every repeat goes there. */
  static final Table<Record> MUST_NOT_RUN = DSL.table(DSL.name("repeat_must_not_run"));
  static final Field<String> WHAT = DSL.field(DSL.name("what"), SQLDataType.CLOB);
  static final String INSERT_PAYMENT = "INSERT INTO payments (request, amount) VALUES (?, ?) RETURNING id";


  // ---------------------------------------------------------------------------------------------
  // State

  /** One database, one pool, shared by every guard and every thread; the tables of all guards. */
  @State(Scope.Benchmark)
  public static class Db {
    public TestDatabase db;
    public HikariDataSource ds;
    /** The database's forms of the benchmark's own SQL. */
    BenchSql sql;
    /** The instance that applied the ids before the run: "another replica". */
    public Idem writer;

    @Setup(Level.Trial)
    public void start() throws SQLException {
      db = TestDatabase.newDatabase("bench_repeat");
      sql = BenchSql.of(db);
      ds = db.warmDataSource(POOL);
      writer = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      createTables(ds, sql);
    }

    /** Before every iteration, off the clock: no method pays for the clean-up of earlier writes. */
    @Setup(Level.Iteration)
    public void settle() throws SQLException {
      Settle.database(ds);
    }

    @TearDown(Level.Trial)
    public void stop() throws SQLException {
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("SELECT count(*) FROM repeat_must_not_run")) {
        rs.next();
        if (rs.getLong(1) != 0) {
          System.err.println("RepeatBenchmark: " + rs.getLong(1) + " statements given with a repeat ran (must be 0)");
        }
      } finally {
        ds.close();
        db.close();
      }
    }

    /** A fresh Idem on the same pool, as another replica (or this one after a restart) would have. */
    public Idem freshIdem() {
      return Idem.builder(ds).build();
    }
  }

  /** The inbox ids "m-0".."m-{IDS-1}" of {@link #CONSUMER}, applied by {@link Db#writer}. */
  @State(Scope.Benchmark)
  public static class InboxIds {
    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      Inbox in = db.writer.inbox(CONSUMER).window(WINDOW).build();
      parallel(IDS, i -> {
        String id = inboxId(i);
        in.receive(id, tx -> {
          pay(tx.connection(), "inbox-" + id);
        });
      });
      Settle.database(db.ds);
    }
  }

  /** The executor keys ({@link #SCOPE}, "k-0".."k-{IDS-1}"), completed with a stored result by {@link Db#writer}. */
  @State(Scope.Benchmark)
  public static class ExecutorKeys {
    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      IdempotentExecutor ex = db.writer.executor().window(WINDOW).build();
      parallel(IDS, i -> {
        String request = executorKey(i);
        ex.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> pay(tx.connection(), request));
      });
      Settle.database(db.ds);
    }
  }

  /**
   * A thread's guard that has never seen the keys it is given: a new Idem and guard for each pass
   * over the {@value #IDS} keys, so its recent-keys memory never knows them.
   */
  abstract static class Cold<G> {
    Db db;
    G guard;
    int next;
    int offset;
    public long passes;

    void start(Db db) {
      this.db = db;
      offset = ThreadLocalRandom.current().nextInt(IDS);
      pass();
    }

    abstract G fresh(Idem idem);

    private void pass() {
      guard = fresh(db.freshIdem());
      next = 0;
      passes++;
    }

    /** The index of the next key, never seen by {@link #guard}. */
    int nextIndex() {
      if (next == IDS) {
        pass();
      }
      return (offset + next++) % IDS;
    }
  }

  /** A thread's inbox that has never seen the ids it receives. */
  @State(Scope.Thread)
  public static class ColdInbox extends Cold<Inbox> {
    @Setup(Level.Trial)
    public void start(Db db, InboxIds applied) {
      start(db);
    }

    @Override
    Inbox fresh(Idem idem) {
      return idem.inbox(CONSUMER).window(WINDOW).build();
    }

    String id() {
      return inboxId(nextIndex());
    }
  }

  /** A thread's executor that has never seen the keys it executes. */
  @State(Scope.Thread)
  public static class ColdExecutor extends Cold<IdempotentExecutor> {
    @Setup(Level.Trial)
    public void start(Db db, ExecutorKeys completed) {
      start(db);
    }

    @Override
    IdempotentExecutor fresh(Idem idem) {
      return idem.executor().window(WINDOW).build();
    }

    String key() {
      return executorKey(nextIndex());
    }
  }

  /**
   * A thread's executor for a mixed workload: mostly new keys, some repeats of keys another
   * instance completed and this one never saw; fresh per pass, like {@link ColdExecutor}.
   */
  @State(Scope.Thread)
  public static class MixedExecutor {
    final ColdExecutor cold = new ColdExecutor();
    final ThreadKeys keys = new ThreadKeys();

    @Setup(Level.Trial)
    public void start(Db db, ExecutorKeys completed) {
      cold.start(db, completed);
      keys.start();
    }
  }

  /** One inbox that applied {@value #WARM_IDS} ids itself, so it remembers them; shared by the threads. */
  @State(Scope.Benchmark)
  public static class WarmInbox {
    public Inbox inbox;

    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      inbox = db.freshIdem().inbox(CONSUMER).window(WINDOW).build();
      Inbox in = inbox;
      parallel(WARM_IDS, i -> {
        String id = warmId(i);
        in.receive(id, tx -> {
          pay(tx.connection(), "inbox-" + id);
        });
      });
      Settle.database(db.ds);
    }
  }

  /** One executor that completed {@value #WARM_IDS} keys itself, so it remembers them; shared by the threads. */
  @State(Scope.Benchmark)
  public static class WarmExecutor {
    public IdempotentExecutor executor;

    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      executor = db.freshIdem().executor().window(WINDOW).build();
      IdempotentExecutor ex = executor;
      parallel(WARM_IDS, i -> {
        String request = warmId(i);
        ex.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> pay(tx.connection(), request));
      });
      Settle.database(db.ds);
    }
  }

  /** Camel's JDBC idempotent repository with the ids "m-0".. present (added through it). */
  @State(Scope.Benchmark)
  public static class Camel {
    public JdbcMessageIdRepository repository;

    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      repository = camelRepository(db.ds);
      JdbcMessageIdRepository r = repository;
      present(db, "camel", r::add);
    }

    @TearDown(Level.Trial)
    public void stop() {
      repository.stop();
    }
  }

  /** Spring Integration's JDBC metadata store with the keys "m-0".. present (put through it). */
  @State(Scope.Benchmark)
  public static class SpringIntegration {
    public JdbcMetadataStore store;

    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      store = springIntegrationStore(db.ds);
      JdbcMetadataStore s = store;
      present(db, "spring integration", id -> s.putIfAbsent(id, "1") == null);
    }

    @TearDown(Level.Trial)
    public void stop() {
      store.stop();
    }
  }

  /** The hand-rolled guard's keys "m-0".. present. */
  @State(Scope.Benchmark)
  public static class Naive {
    @Setup(Level.Trial)
    public void start(Db db) throws Exception {
      present(db, "naive guard", id -> {
        try (Connection c = db.ds.getConnection()) {
          return naiveGuard(c, db.sql, id, null);
        }
      });
    }
  }


  // ---------------------------------------------------------------------------------------------
  // The yardsticks

  /** An auto-commit primary-key SELECT of one payment row. */
  @Benchmark
  public String barePkRead(Db db, ThreadKeys l) throws SQLException {
    try (Connection c = db.ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT request, amount FROM payments WHERE id = ?")) {
      ps.setLong(1, 1 + l.nextIndex(READ_ROWS));
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  /** A bare JDBC transaction inserting one payment row. */
  @Benchmark
  public String bareEffect(Db db, ThreadKeys l) throws SQLException {
    return BareTransaction.run(db.ds, c -> pay(c, l.newKey()));
  }

  // ---------------------------------------------------------------------------------------------
  // Repeats: idem

  /** A repeat of an applied id, by an inbox that never saw it, callback form: the callback must not run. */
  @Benchmark
  public void inboxRepeatCold(ColdInbox cold) {
    String id = cold.id();
    replayed(cold.guard.receive(id, tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + id);
    }), id);
  }

  /** A repeat of an applied id, by an inbox that never saw it, statements form: the statement must not run. */
  @Benchmark
  public void inboxRepeatColdStatement(ColdInbox cold) {
    String id = cold.id();
    replayed(cold.guard.receive(id, mustNotRun(id)), id);
  }

  /** A repeat of an id the inbox applied itself lately. */
  @Benchmark
  public void inboxRepeatWarm(WarmInbox warm, ThreadKeys l) {
    String id = warmId(l.nextIndex(WARM_IDS));
    replayed(warm.inbox.receive(id, tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + id);
    }), id);
  }

  /** A repeat of a completed key, by an executor that never handled it: the stored result, replayed. */
  @Benchmark
  public void executorReplayCold(ColdExecutor cold) {
    String request = cold.key();
    replayedValue(cold.guard.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + request);
    }), request);
  }

  /** As {@link #executorReplayCold}, the effect given as a statement (nothing replayed but "done"). */
  @Benchmark
  public void executorReplayColdStatement(ColdExecutor cold) {
    String request = cold.key();
    replayed(cold.guard.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), mustNotRun(request)), request);
  }

  /** A repeat of a key the executor completed itself lately. */
  @Benchmark
  public void executorReplayWarm(WarmExecutor warm, ThreadKeys l) {
    String request = warmId(l.nextIndex(WARM_IDS));
    replayedValue(warm.executor.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> {
      throw new IllegalStateException("a repeat must not run the effect: " + request);
    }), request);
  }

  // ---------------------------------------------------------------------------------------------
  // Repeats: the peers and the hand-rolled guard (none caches: warm is cold)

  /** Camel: {@code JdbcMessageIdRepository.add} of a present id (a transaction: SELECT COUNT(*), COMMIT). */
  @Benchmark
  public boolean camelRepeatCold(Camel camel, ThreadKeys l) {
    if (camel.repository.add(inboxId(l.nextIndex(IDS)))) {
      throw new IllegalStateException("camel took a present id for a new one");
    }
    return false;
  }

  /** Spring Integration: {@code JdbcMetadataStore.putIfAbsent} of a present key (INSERT ... HAVING COUNT(*)=0, then SELECT). */
  @Benchmark
  public String springIntegrationRepeatCold(SpringIntegration si, ThreadKeys l) {
    String present = si.store.putIfAbsent(inboxId(l.nextIndex(IDS)), "1");
    if (present == null) {
      throw new IllegalStateException("spring integration took a present key for a new one");
    }
    return present;
  }

  /** The hand-rolled guard: BEGIN, INSERT ... ON CONFLICT DO NOTHING (nothing inserted), ROLLBACK. */
  @Benchmark
  public boolean naiveGuardRepeat(Db db, Naive naive, ThreadKeys l) throws SQLException {
    try (Connection c = db.ds.getConnection()) {
      if (naiveGuard(c, db.sql, inboxId(l.nextIndex(IDS)), null)) {
        throw new IllegalStateException("the naive guard took a present key for a new one");
      }
      return false;
    }
  }

  /** A mixed workload, 10 % repeats: what reading first when it pays costs the new keys (compare executorNewKeyCallback). */
  @Benchmark
  public void executorMixed10(MixedExecutor mixed) throws SQLException {
    mixed(mixed, 0.1);
  }

  /** A mixed workload, 90 % repeats. */
  @Benchmark
  public void executorMixed90(MixedExecutor mixed) throws SQLException {
    mixed(mixed, 0.9);
  }

  /** With probability {@code repeats} a repeat (its stored result replayed), else a new key (its payment inserted). */
  static void mixed(MixedExecutor mixed, double repeats) throws SQLException {
    if (ThreadLocalRandom.current().nextDouble() < repeats) {
      String request = mixed.cold.key();
      replayedValue(mixed.cold.guard.execute(IdempotencyKey.of(SCOPE, request), fingerprint(request), Codec.utf8(), tx -> {
        throw new IllegalStateException("a repeat must not run the effect: " + request);
      }), request);
    } else {
      String request = mixed.keys.newKey();
      Execution<String> e = mixed.cold.guard.execute(IdempotencyKey.of("bench/new", request), fingerprint(request), Codec.utf8(),
          tx -> pay(tx.connection(), request));
      if (!e.applied()) {
        throw new IllegalStateException("a new key was answered " + e);
      }
    }
  }

  /** A repeat must be answered as one (an InFlight answer would be cheap and would not be a repeat recognised). */
  static void replayed(dev.idem.result.Execution<?> e, String id) {
    if (!(e instanceof dev.idem.result.Execution.Replayed)) {
      throw new IllegalStateException("a repeat of " + id + " was answered " + e);
    }
  }

  /** As {@link #replayed}, and the stored result must come back. */
  static void replayedValue(dev.idem.result.Execution<String> e, String id) {
    if (!(e instanceof dev.idem.result.Execution.Replayed<String> r) || r.value() == null) {
      throw new IllegalStateException("a replay of " + id + " was answered " + e);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // New keys

  /** The payment insert through the executor, as a statement: claim, insert, COMMIT in one round trip. */
  @Benchmark
  public void executorNewKeyStatement(ExecutorState ex, ThreadKeys l) {
    String request = l.newKey();
    ex.executor.execute(IdempotencyKey.of("bench/new", request), fingerprint(request), payment(request));
  }

  /** The payment insert through the executor, as a callback, its result (the payment id) stored. */
  @Benchmark
  public void executorNewKeyCallback(ExecutorState ex, ThreadKeys l) throws SQLException {
    String request = l.newKey();
    ex.executor.execute(IdempotencyKey.of("bench/new", request), fingerprint(request), Codec.utf8(),
        tx -> pay(tx.connection(), request));
  }

  /** The payment insert through the inbox, as a statement. */
  @Benchmark
  public void inboxNewKeyStatement(InboxState in, ThreadKeys l) {
    String id = l.newKey();
    in.inbox.receive(id, payment(id));
  }

  /** The payment insert through the inbox, as a callback. */
  @Benchmark
  public void inboxNewKeyCallback(InboxState in, ThreadKeys l) throws SQLException {
    String id = l.newKey();
    in.inbox.receive(id, tx -> {
      pay(tx.connection(), id);
    });
  }

  /** The hand-rolled guard for a new key: BEGIN, INSERT ... ON CONFLICT DO NOTHING, the payment insert, COMMIT. */
  @Benchmark
  public boolean naiveGuardNewKey(Db db, ThreadKeys l) throws SQLException {
    String key = l.newKey();
    try (Connection c = db.ds.getConnection()) {
      return naiveGuard(c, db.sql, key, key);
    }
  }

  /**
   * The hand-rolled guard that keeps what a replay needs, as the executor's callback form does: the
   * request's fingerprint, the result and an expiry (indexed, for deletion). BEGIN, the claim, the
   * payment insert, the UPDATE storing the result, COMMIT. The like-for-like yardstick of {@link
   * #executorNewKeyCallback}; {@link #naiveGuardNewKey} stores nothing, so no guard that answers a
   * repeat with the first result can match it.
   */
  @Benchmark
  public boolean naiveGuardNewKeyStored(Db db, ThreadKeys l) throws SQLException {
    String key = l.newKey();
    try (Connection c = db.ds.getConnection()) {
      return handRolled(c, db.sql.naiveStoredClaim(), key, java.util.HexFormat.of().parseHex(fingerprint(key).hex()), () -> pay(c, key));
    }
  }

  /** An executor for new keys (its memory of recent keys is irrelevant to them). */
  @State(Scope.Benchmark)
  public static class ExecutorState {
    public IdempotentExecutor executor;

    @Setup(Level.Trial)
    public void start(Db db) {
      executor = db.writer.executor().window(WINDOW).build();
    }
  }

  /** An inbox for new ids. */
  @State(Scope.Benchmark)
  public static class InboxState {
    public Inbox inbox;

    @Setup(Level.Trial)
    public void start(Db db) {
      inbox = db.writer.inbox("bench-new").window(WINDOW).build();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Helpers, shared with RepeatCost and InterleavedRatios

  /**
   * The tables of the effect, of the yardstick, of the hand-rolled guard and of the peers (the DDL
   * each ships for the database), then VACUUM ANALYZE (MariaDB: ANALYZE TABLE). idem's tables come
   * from {@code IdemFlyway.migrate}.
   */
  public static void createTables(javax.sql.DataSource ds, BenchSql sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql.effectTable("payments", "request"));
      st.execute(sql.seedPayments(READ_ROWS));
      st.execute(sql.mustNotRunTable());
      st.execute(sql.naiveKeysTable());
      // Rows before the statistics, as a key table in service has: planned on an empty table, the
      // UPDATE's cached plan is a sequential scan, and the guard slows down as its table grows.
      for (String s : sql.naiveStoredKeysTable(READ_ROWS)) {
        st.execute(s);
      }
      st.execute(BenchSql.CAMEL_DDL);
      st.execute(sql.springIntegrationTable());
      if (!sql.mariadb()) {
        st.execute("VACUUM ANALYZE");
      }
    }
    if (sql.mariadb()) {
      Settle.database(ds);
    }
  }

  public static String inboxId(int i) {
    return "m-" + i;
  }

  public static String executorKey(int i) {
    return "k-" + i;
  }

  public static String warmId(int i) {
    return "w-" + i;
  }

  /** What a caller would fingerprint: the request's fields. */
  public static Fingerprint fingerprint(String request) {
    return Fingerprint.ofFields(Map.of("request", request, "amount", 100));
  }

  /** The payment insert as a jOOQ statement. */
  public static Query payment(String request) {
    return SQL.insertInto(PAYMENTS, REQUEST, AMOUNT).values(request, 100);
  }

  /** A statement given with a repeat: if it ever runs, {@link Db#stop} reports it. */
  public static Query mustNotRun(String id) {
    return SQL.insertInto(MUST_NOT_RUN, WHAT).values(id);
  }

  /** The payment insert on {@code c}; its id, the effect's result. */
  public static String pay(Connection c, String request) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(INSERT_PAYMENT)) {
      ps.setString(1, request);
      ps.setInt(2, 100);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return "payment-" + rs.getLong(1);
      }
    }
  }

  /**
   * The hand-rolled guard: in one transaction, {@code INSERT INTO naive_keys ... ON CONFLICT DO
   * NOTHING} (MariaDB: {@code INSERT IGNORE}); if it inserted the key, the payment insert ({@code
   * request}, unless null) and COMMIT, else ROLLBACK. True if the key was new.
   */
  public static boolean naiveGuard(Connection c, BenchSql sql, String key, String request) throws SQLException {
    return handRolled(c, sql.naiveClaim(), key, null, () -> {
      if (request != null) {
        pay(c, request);
      }
      return null;
    });
  }

  /** The effect of a hand-rolled guard: what it stores for replays, or null for nothing. */
  @FunctionalInterface
  interface GuardedEffect {
    String run() throws SQLException;
  }

  /**
   * A hand-rolled guard's transaction on {@code c}: the {@code claim} insert of {@code key} (and
   * {@code fingerprint}, if not null) that inserts nothing for a key already there ({@code ON
   * CONFLICT DO NOTHING}, MariaDB's {@code INSERT IGNORE}); if it inserted nothing,
   * ROLLBACK; else the effect, the UPDATE of {@code naive_stored_keys} storing what it returned (if
   * not null), COMMIT. True if the key was new.
   */
  static boolean handRolled(Connection c, String claim, String key, byte[] fingerprint, GuardedEffect effect) throws SQLException {
    c.setAutoCommit(false);
    try {
      try (PreparedStatement ps = c.prepareStatement(claim)) {
        ps.setString(1, key);
        if (fingerprint != null) {
          ps.setBytes(2, fingerprint);
        }
        if (ps.executeUpdate() == 0) {
          c.rollback();
          return false;
        }
      }
      String result = effect.run();
      if (result != null) {
        try (PreparedStatement ps = c.prepareStatement("UPDATE naive_stored_keys SET result = ? WHERE k = ?")) {
          ps.setBytes(1, result.getBytes(java.nio.charset.StandardCharsets.UTF_8));
          ps.setString(2, key);
          ps.executeUpdate();
        }
      }
      c.commit();
      return true;
    } catch (SQLException | RuntimeException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(true);
    }
  }

  /** Camel's repository on {@code ds}, started; the table is ours (created by {@link Db}), not Camel's. */
  public static JdbcMessageIdRepository camelRepository(javax.sql.DataSource ds) {
    JdbcMessageIdRepository r = new JdbcMessageIdRepository(ds, PEER_NAME);
    r.setCreateTableIfNotExists(false);
    r.start();
    return r;
  }

  /** Spring Integration's metadata store on {@code ds}, in the region {@link #PEER_NAME}, started. */
  public static JdbcMetadataStore springIntegrationStore(javax.sql.DataSource ds) {
    JdbcMetadataStore s = new JdbcMetadataStore(ds);
    s.setRegion(PEER_NAME);
    s.afterPropertiesSet();
    s.start();
    return s;
  }

  /** A set-up step run for 0..n-1 on {@link #POOL} threads. */
  @FunctionalInterface
  public interface IndexedStep {
    void run(int i) throws Exception;
  }

  /** Adds one id, through a guard; true if it was new. */
  @FunctionalInterface
  interface Add {
    boolean add(String id) throws Exception;
  }

  /** Makes the ids "m-0".. present through a peer's own API, each new, and lets the database settle. */
  static void present(Db db, String guard, Add add) throws Exception {
    parallel(IDS, i -> {
      if (!add.add(inboxId(i))) {
        throw new IllegalStateException(guard + ": id " + inboxId(i) + " was present before the set-up added it");
      }
    });
    Settle.database(db.ds);
  }

  /** Runs {@code step} for 0..n-1 on {@link #POOL} threads; rethrows the first failure. */
  public static void parallel(int n, IndexedStep step) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(POOL);
    try {
      AtomicLong next = new AtomicLong();
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < POOL; t++) {
        done.add(pool.submit(() -> {
          for (long i; (i = next.getAndIncrement()) < n; ) {
            step.run((int) i);
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
}
