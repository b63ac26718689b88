package dev.idem.benchmarks;

import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.inbox.Received;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
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
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A consumer's poll of {@value #BATCH} messages, through {@link Inbox#receiveAll} against the
 * single-message guards a user would pick instead, on {@link RepeatBenchmark}'s one pool and
 * database. One operation of a {@code batch...} method is a whole poll (messages a second are its
 * ops a second times {@value #BATCH}); one of the others is one message, since they take messages
 * one at a time. Every effect is the same one-row insert into {@code payments}.
 *
 * <ul>
 *   <li>{@code ...New}: {@value #BATCH} messages never seen. {@link #batchNew}: one {@code
 *       receiveAll} (one transaction). {@link #receiveNew}: idem's single-message {@code receive}.
 *       {@link #camelNew}, {@link #springIntegrationNew}: per message, one Spring
 *       transaction on the pool in which the peer's JDBC store ({@code JdbcMessageIdRepository.add},
 *       {@code JdbcMetadataStore.putIfAbsent}) and the effect both run: the peers at their best,
 *       one commit per message. {@link #handRolledBatchNew}: the same poll written by hand, one
 *       transaction: one {@code INSERT ... ON CONFLICT DO NOTHING RETURNING} of the {@value #BATCH}
 *       ids into a key table, the effect for each id it returned, COMMIT.
 *   <li>{@code ...Replay}: {@value #BATCH} messages all applied before the run (a broker's
 *       redelivery of a whole poll, or a replay from an offset): no effect runs.
 * </ul>
 *
 * <p>Targets (the issue "the broker hops at scale", and issue 37): {@code batchNew} and {@code
 * batchReplay} at least 5x the best peer's throughput in messages, and {@code batchNew} at least
 * 0.95 of {@code handRolledBatchNew}, in one run, at 1 and at 8 threads (each thread its own ids,
 * and a connection of the pool of {@value RepeatBenchmark#POOL}). Run interleaved (the figures),
 * with a warm-up long enough for the JIT compiler to finish with a batch's per-message code:
 * {@code java -Dthreads=1 -DwarmupMillis=10000 -cp idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.InterleavedRatios batch 5 3000}.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(1)
@Fork(1)
@Warmup(iterations = 1, time = 5)
@Measurement(iterations = 3, time = 5)
public class InboxBatchBenchmark {
  /** Messages per poll. */
  public static final int BATCH = 500;

  /** A polled message: the id its producer minted. */
  public record Message(String id) {}

  /** The guards, over {@link RepeatBenchmark.Db}'s pool, with the ids "m-0".. applied through each. */
  @State(Scope.Benchmark)
  public static class Guards {
    public RepeatBenchmark.Db db;
    public RepeatBenchmark.Camel camel;
    public RepeatBenchmark.SpringIntegration si;
    public Inbox inbox;
    /** One transaction per message, for the peers: their JDBC stores join it (Spring's DataSourceUtils). */
    public TransactionTemplate perMessage;
    /** The hand-rolled batch's claim of {@value InboxBatchBenchmark#BATCH} keys, rendered once. */
    String handRolledClaim;

    @Setup(Level.Trial)
    public void start() throws Exception {
      db = new RepeatBenchmark.Db();
      db.start();
      new RepeatBenchmark.InboxIds().start(db);
      camel = new RepeatBenchmark.Camel();
      camel.start(db);
      si = new RepeatBenchmark.SpringIntegration();
      si.start(db);
      inbox = db.freshIdem().inbox(RepeatBenchmark.CONSUMER).window(RepeatBenchmark.WINDOW).build();
      perMessage = new TransactionTemplate(new DataSourceTransactionManager(db.ds));
      handRolledClaim = db.sql.naiveClaimBatch(BATCH);
    }

    @Setup(Level.Iteration)
    public void settle() throws SQLException {
      db.settle();
    }

    @org.openjdk.jmh.annotations.TearDown(Level.Trial)
    public void stop() throws SQLException {
      camel.stop();
      si.stop();
      db.stop();
    }
  }

  static List<Message> fresh(ThreadKeys l) {
    List<Message> batch = new ArrayList<>(BATCH);
    for (int i = 0; i < BATCH; i++) {
      batch.add(new Message(l.newKey()));
    }
    return batch;
  }

  /** {@value #BATCH} consecutive ids of the ones applied before the run, from a thread's turn. */
  static List<Message> applied(ThreadKeys l) {
    int from = l.nextIndex(RepeatBenchmark.IDS / BATCH) * BATCH;
    List<Message> batch = new ArrayList<>(BATCH);
    for (int i = 0; i < BATCH; i++) {
      batch.add(new Message(RepeatBenchmark.inboxId(from + i)));
    }
    return batch;
  }

  static void check(Received<Message> r, boolean replay) {
    if ((replay ? r.duplicates() : r.applied()).size() != BATCH) {
      throw new IllegalStateException("receiveAll: " + r.applied().size() + " applied, " + r.duplicates().size()
          + " duplicates, " + r.failed() + " failed, " + r.inFlight().size() + " in flight; expected " + BATCH
          + (replay ? " duplicates" : " applied"));
    }
  }

  @Benchmark
  public Received<Message> batchNew(Guards g, ThreadKeys l) {
    Received<Message> r = g.inbox.receiveAll(fresh(l), Message::id, (tx, m) -> RepeatBenchmark.pay(tx.connection(), m.id()));
    check(r, false);
    return r;
  }

  /**
   * What a user would write by hand for a poll: in one transaction, {@code INSERT INTO naive_keys
   * (k) VALUES (?), ... ON CONFLICT DO NOTHING RETURNING k} (MariaDB: {@code INSERT IGNORE ...
   * RETURNING k}) for the {@value #BATCH} ids, then the same effect as {@link #batchNew} for each
   * id returned, COMMIT. No savepoints, no failure handling: the yardstick for {@code receiveAll}.
   */
  @Benchmark
  public int handRolledBatchNew(Guards g, ThreadKeys l) throws SQLException {
    List<Message> poll = fresh(l);
    int applied = 0;
    try (Connection c = g.db.ds.getConnection()) {
      c.setAutoCommit(false);
      try {
        List<String> claimed = new ArrayList<>(BATCH);
        try (PreparedStatement ps = c.prepareStatement(g.handRolledClaim)) {
          for (int i = 0; i < BATCH; i++) {
            ps.setString(i + 1, poll.get(i).id());
          }
          try (ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
              claimed.add(rs.getString(1));
            }
          }
        }
        for (String id : claimed) {
          RepeatBenchmark.pay(c, id);
          applied++;
        }
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(true);
      }
    }
    if (applied != BATCH) {
      throw new IllegalStateException("hand-rolled batch: " + applied + " of " + BATCH + " new ids applied");
    }
    return applied;
  }

  @Benchmark
  public Received<Message> batchReplay(Guards g, ThreadKeys l) {
    Received<Message> r = g.inbox.receiveAll(applied(l), Message::id, (tx, m) -> {
      throw new IllegalStateException("the effect of an applied message ran");
    });
    check(r, true);
    return r;
  }

  @Benchmark
  public void receiveNew(Guards g, ThreadKeys l) throws SQLException {
    String id = l.newKey();
    if (!g.inbox.receive(id, tx -> {
      RepeatBenchmark.pay(tx.connection(), id);
    }).applied()) {
      throw new IllegalStateException("receive: a new message was not applied");
    }
  }

  @Benchmark
  public void receiveReplay(Guards g, ThreadKeys l) throws SQLException {
    if (!g.inbox.receive(RepeatBenchmark.inboxId(l.nextIndex(RepeatBenchmark.IDS)), tx -> {
      throw new IllegalStateException("the effect of an applied message ran");
    }).replayed()) {
      throw new IllegalStateException("receive: an applied message was not a repeat");
    }
  }

  @Benchmark
  public void camelNew(Guards g, ThreadKeys l) {
    peerNew(g, l.newKey(), g.camel.repository::add);
  }

  @Benchmark
  public void camelReplay(Guards g, ThreadKeys l) {
    peerReplay(g, l, g.camel.repository::add);
  }

  @Benchmark
  public void springIntegrationNew(Guards g, ThreadKeys l) {
    peerNew(g, l.newKey(), id -> g.si.store.putIfAbsent(id, "1") == null);
  }

  @Benchmark
  public void springIntegrationReplay(Guards g, ThreadKeys l) {
    peerReplay(g, l, id -> g.si.store.putIfAbsent(id, "1") == null);
  }

  /** A peer's store: adds the id, true if it was new. */
  @FunctionalInterface
  interface Store {
    boolean add(String id);
  }

  /** A new message through a peer's store and the effect, in one Spring transaction. */
  private static void peerNew(Guards g, String id, Store store) {
    g.perMessage.executeWithoutResult(status -> {
      if (!store.add(id)) {
        throw new IllegalStateException("a peer took a new message for a present one");
      }
      pay(g, id);
    });
  }

  /** An applied message through a peer's store, in one Spring transaction: no effect. */
  private static void peerReplay(Guards g, ThreadKeys l, Store store) {
    String id = RepeatBenchmark.inboxId(l.nextIndex(RepeatBenchmark.IDS));
    g.perMessage.executeWithoutResult(status -> {
      if (store.add(id)) {
        throw new IllegalStateException("a peer took an applied message for a new one");
      }
    });
  }

  /** The effect, on the connection of the Spring transaction the peer's store runs in. */
  private static void pay(Guards g, String id) {
    try {
      RepeatBenchmark.pay(DataSourceUtils.getConnection(g.db.ds), id);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
