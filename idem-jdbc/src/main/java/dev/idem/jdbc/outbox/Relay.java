package dev.idem.jdbc.outbox;

import static dev.idem.jdbc.internal.OutboxTable.*;

import dev.idem.internal.Events;
import dev.idem.internal.Failures;
import dev.idem.internal.base.Require;
import dev.idem.internal.Stopping;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Expiry;
import dev.idem.jdbc.internal.InboxReceived;
import dev.idem.jdbc.internal.OwnTransaction;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadLocalRandom;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.postgresql.PGConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Moves outbox messages to a {@link Publisher}: claims a batch of pending messages that are due,
 * publishes each with its id, and marks the published ones sent, in one transaction per batch.
 *
 * <pre>{@code
 * try (Relay relay = idem.relay(m -> broker.send(m.topic(), m.id().toString(), m.payload()))
 *     .batchSize(100).pollInterval(Duration.ofMillis(200)).maxAttempts(10).build()) {
 *   relay.start();
 *   ...
 * }
 * }</pre>
 *
 * <p>Guarantees, observable as rows of the outbox table: every committed message is eventually
 * published while some relay runs, and stays in the table (pending, sent, or parked with its last
 * error). Any number of relays, in any number of processes, may run at once: a batch is claimed
 * with {@code FOR UPDATE SKIP LOCKED}, so each pending message is in at most one running batch.
 * A message whose publish fails is tried again after an exponential back-off with jitter (from the
 * database clock); after {@code maxAttempts} failures it is parked (status {@code 'X'}, {@code
 * last_error} set) until {@code idem.operations().redrive(id)}. Before it parks a message it asks
 * whether an inbox of this database already received it (a publish that reached the broker but
 * whose acknowledgement was lost): then its WARN line says the effect committed and names the
 * consumer, and the operator's list flags it ({@code ParkedMessage.effectCommitted}).
 *
 * <p>Does not guarantee: exactly once. A crash, a lost connection, or a failed commit after a
 * successful publish sends the message again, with the same id: delivery is <b>at least once</b>
 * and the receiver must deduplicate by id (an inbox). Without {@link Builder#orderedByAggregateKey},
 * there is no order between messages (a retried message goes out after younger ones).
 *
 * <p>On MariaDB the same guarantees, with {@code FOR UPDATE SKIP LOCKED} (MariaDB 10.6 and later)
 * and the back-off from MariaDB's clock; there is no {@code LISTEN}/{@code NOTIFY}, so {@link
 * Builder#listen} does nothing there and the loop polls at its poll interval.
 *
 * <p>Thread-safe: {@link #runOnce()} may be called from several threads; {@link #start()} runs one
 * background loop until {@link #close()}.
 */
public final class Relay implements AutoCloseable {
  /**
   * The longest {@linkplain Builder#retention retention}: 36,500 days, about 100 years. A longer
   * one reaches past what a {@code Duration} in microseconds or a PostgreSQL timestamp can hold,
   * and failed only when {@link #purgeSent()} ran.
   */
  public static final Duration MAX_RETENTION = DbTime.LONGEST;

  /**
   * The longest {@linkplain Builder#backoff back-off}, initial or maximum: 365 days. A message that
   * should wait longer is better parked ({@code maxAttempts}) and re-driven.
   */
  public static final Duration MAX_BACKOFF = Duration.ofDays(365);

  /** The longest {@linkplain Builder#pollInterval poll interval}: one day. */
  public static final Duration MAX_POLL_INTERVAL = Duration.ofDays(1);

  /** The longest {@linkplain Builder#shutdownTimeout shutdown timeout}: ten minutes. */
  public static final Duration MAX_SHUTDOWN_TIMEOUT = Duration.ofMinutes(10);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.relay");
  private static final int MAX_ERROR_LENGTH = 2000;
  /** {@code last_error} when the database refused the error's own text. */
  static final String UNSTORABLE_ERROR = "(the publisher's error could not be stored; see the relay's log)";
  private static final int PURGE_BATCH = 1000;
  private static final int PURGE_MAX_BATCHES = 100;
  /** How often the background loop deletes sent messages past their retention. */
  private static final Duration PURGE_EVERY = Duration.ofMinutes(1);

  private final Context idem;
  private final Publisher publisher;
  private final int batchSize;
  private final Duration pollInterval;
  private final int maxAttempts;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  private final boolean ordered;
  private final Duration retention;
  private final boolean listen;
  private final ThreadFactory threads;
  private final Duration shutdownTimeout;
  private final Events events;
  private final String claimSql;
  /** PostgreSQL's mark of the sent messages, bound to an array of their ids; MariaDB's is {@link #markSentSql(int)}. */
  private final String markSentSql;
  private final String markFailedSql;
  /** The first inbox consumer that received one message (see {@link InboxReceived}). */
  private final String receivedBySql;
  /** On MariaDB: ids are text, headers JSON arrays, times UTC {@code DATETIME}s, and there is no LISTEN. */
  private final boolean mariadb;

  private final Object wake = new Object();
  private Thread loop;
  private volatile boolean running;

  private Relay(Builder b) {
    this.idem = b.idem;
    this.publisher = b.publisher;
    this.batchSize = b.batchSize;
    this.pollInterval = b.pollInterval;
    this.maxAttempts = b.maxAttempts;
    this.initialBackoff = b.initialBackoff;
    this.maxBackoff = b.maxBackoff;
    this.ordered = b.ordered;
    this.retention = b.retention;
    this.listen = b.listen;
    this.threads = b.threads;
    this.shutdownTimeout = b.shutdownTimeout;
    this.events = Events.to(idem.listener(), "outbox");
    DSLContext d = idem.dsl();
    this.mariadb = idem.mariadb();

    // Claim by locking, never by reading "id (or a sequence position) > the last one seen": ids and
    // sequence values are taken before commit and commit out of order, so a reader that moves past
    // the highest seen skips the rows that commit later, for good. SKIP LOCKED lets relays share
    // the table: each takes rows no other running batch holds.
    Condition due = STATUS.eq(DSL.inline(PENDING)).and(NEXT_ATTEMPT_AT.le(DbTime.clock()));
    if (ordered) {
      // Only the head of each aggregate key is eligible: no older message of the key still waits
      // (pending, even if backing off, or parked). A parked head therefore blocks its key. Older
      // is by the database's order of writing (seq), never by the ids: those are minted from the
      // clock of whichever JVM enqueued, and two instances' clocks may disagree.
      Table<?> older = T.as("older");
      Field<String> olderKey = DSL.field(DSL.name("older", "aggregate_key"), SQLDataType.CLOB);
      Field<Long> olderSeq = DSL.field(DSL.name("older", "seq"), SQLDataType.BIGINT);
      Field<String> olderStatus = DSL.field(DSL.name("older", "status"), SQLDataType.CHAR(1));
      Field<String> key = DSL.field(DSL.name("idem_outbox", "aggregate_key"), SQLDataType.CLOB);
      Field<Long> seq = DSL.field(DSL.name("idem_outbox", "seq"), SQLDataType.BIGINT);
      due = due.and(AGGREGATE_KEY.isNull().or(DSL.notExists(DSL.selectOne().from(older)
          .where(olderKey.eq(key))
          .and(olderStatus.ne(DSL.inline(SENT)))
          .and(olderSeq.lt(seq)))));
    }
    // On MariaDB too, the NOT EXISTS above reads the other rows of the key without locking them
    // (a locking clause locks only the rows of its own query block), so a head locked by another
    // relay's batch is still seen there, as pending, and its younger messages wait.
    var claim = d.select(mariadb ? ID_TEXT : ID, TOPIC, AGGREGATE_KEY, PAYLOAD, mariadb ? HEADER_NAMES_JSON : HEADER_NAMES,
            mariadb ? HEADER_VALUES_JSON : HEADER_VALUES, CREATED_AT, ATTEMPTS)
        .from(T)
        .where(due)
        .orderBy(NEXT_ATTEMPT_AT, SEQ)
        .limit(DSL.val(0));
    this.claimSql = d.render(claim.forUpdate().skipLocked());
    this.markSentSql = mariadb ? null : d.render(sentMark(d).where(ID.eq(DSL.any(DSL.val((UUID[]) null, SQLDataType.UUID.array())))));
    Field<Integer> attempts = ATTEMPTS.plus(DSL.inline(1));
    // status before attempts: MariaDB evaluates an UPDATE's assignments left to right, each seeing
    // the ones before it, so the parking test must come before attempts is raised (PostgreSQL
    // reads the old row in every assignment, in any order).
    this.markFailedSql = d.render(d.update(T)
        .set(STATUS, DSL.when(attempts.ge(DSL.val(0)), DSL.inline(PARKED)).otherwise(DSL.inline(PENDING)))
        .set(ATTEMPTS, attempts)
        .set(LAST_ERROR, DSL.val((String) null, LAST_ERROR))
        .set(NEXT_ATTEMPT_AT, DbTime.plusMicros(DbTime.clock(), DSL.val(0L)))
        .where(mariadb ? ID_TEXT.eq(DSL.val((String) null, ID_TEXT)) : ID.eq(DSL.val((UUID) null, ID))));
    this.receivedBySql = InboxReceived.firstConsumerSql(d, mariadb);
  }

  /** The sent mark, without its {@code WHERE}. */
  private static org.jooq.UpdateSetMoreStep<?> sentMark(DSLContext d) {
    return d.update(T)
        .set(STATUS, DSL.inline(SENT))
        .set(SENT_AT, DbTime.clock())
        .set(ATTEMPTS, ATTEMPTS.plus(DSL.inline(1)))
        .set(LAST_ERROR, DSL.inline((String) null));
  }

  /** MariaDB's sent mark of {@code n} messages, by their ids in a list (MariaDB has no arrays). */
  private String markSentSql(int n) {
    DSLContext d = idem.dsl();
    return d.render(sentMark(d).where(ID_TEXT.in(Collections.nCopies(n, DSL.val((String) null, ID_TEXT)))));
  }

  static {
    Factories.register(Relay.class, Publisher.class, Builder.class, Builder::new);
  }

  /**
   * Claims one batch of due messages, publishes each, marks the published ones sent and the failed
   * ones for a retry (or parks them), and commits.
   *
   * @return how many messages were published and marked sent
   */
  public int runOnce() {
    List<Runnable> afterCommit = new ArrayList<>();
    int sent;
    try {
      // READ COMMITTED whatever the pool's level: the batch rests on its row locks, and at
      // SERIALIZABLE relays claiming each other's rows would abort batches already published.
      sent = OwnTransaction.runReadCommitted(idem.dataSource(), c -> relayBatch(c, afterCommit));
    } catch (SQLException e) {
      throw new DataAccessException("relay batch failed: " + e.getMessage(), e);
    }
    afterCommit.forEach(Runnable::run); // the events, once the marks are committed
    return sent;
  }

  private int relayBatch(Connection c, List<Runnable> afterCommit) throws SQLException {
    List<OutboxMessage> batch = claim(c);
    if (batch.isEmpty()) {
      return 0;
    }
    List<UUID> sent = new ArrayList<>(batch.size());
    List<Failure> failed = new ArrayList<>();
    long started = System.nanoTime();
    List<Throwable> outcomes = publishAll(batch);
    // Each message's publish time is the batch's: a batch publisher acknowledges them together.
    Duration took = Duration.ofNanos(System.nanoTime() - started);
    for (int i = 0; i < batch.size(); i++) {
      OutboxMessage m = batch.get(i);
      Throwable e = outcomes.get(i);
      if (e == null) {
        sent.add(m.id());
        afterCommit.add(() -> events.published(m.id(), m.topic(), m.attempt(), took));
      } else {
        Failure f = new Failure(m, e, describe(e), null);
        failed.add(parks(f) ? f.receivedBy(receivedBy(c, m)) : f);
      }
    }
    if (!sent.isEmpty()) {
      markSent(c, sent);
    }
    if (!failed.isEmpty()) {
      markFailed(c, failed);
      for (Failure f : failed) {
        afterCommit.add(() -> events.publishFailed(f.message.id(), f.message.topic(), f.message.attempt(),
            parks(f), f.description));
      }
    }
    return sent.size();
  }

  /** Marks the messages {@code sent} sent, in one statement. */
  private void markSent(Connection c, List<UUID> sent) throws SQLException {
    if (mariadb) {
      try (PreparedStatement ps = c.prepareStatement(markSentSql(sent.size()))) {
        for (int i = 0; i < sent.size(); i++) {
          setId(ps, i + 1, sent.get(i), true);
        }
        ps.executeUpdate();
      }
      return;
    }
    try (PreparedStatement ps = c.prepareStatement(markSentSql)) {
      Array ids = c.createArrayOf("uuid", sent.toArray());
      ps.setArray(1, ids);
      ps.executeUpdate();
    }
  }

  /**
   * The publisher's outcome per message of {@code batch}; a publisher that throws, or answers for
   * another number of messages, failed them all: nothing it did not acknowledge is marked sent.
   */
  private List<Throwable> publishAll(List<OutboxMessage> batch) {
    List<Throwable> outcomes;
    Throwable all;
    try {
      outcomes = publisher.publishAll(batch);
      if (outcomes != null && outcomes.size() == batch.size()) {
        return outcomes;
      }
      all = new IllegalStateException("the publisher's publishAll answered for "
          + (outcomes == null ? "no list" : outcomes.size() + " messages") + " instead of the batch's " + batch.size());
    } catch (Throwable e) {
      Failures.rethrowIfFatal(e);
      all = e;
    }
    return Collections.nCopies(batch.size(), all);
  }

  /** Whether this failure is the one that parks its message. */
  private boolean parks(Failure f) {
    return f.message.attempt() >= maxAttempts;
  }

  /**
   * Records the failed publishes (attempts, back-off or parking, last error) without being able to
   * undo the sent marks before it: a failure here that rolled back the whole batch would republish
   * the sent messages on every poll and never count the failed ones towards parking. So each write
   * runs behind a savepoint. If the database refuses the batch of marks (an error text the database
   * encoding cannot hold, a trigger), each failure is marked alone, so one refused row cannot keep
   * the others from being counted: with its error text, else with {@link #UNSTORABLE_ERROR}, else
   * not at all (it stays due and is tried again, this attempt not counted), and the sent marks
   * still commit.
   */
  private void markFailed(Connection c, List<Failure> failed) throws SQLException {
    List<String> errors = new ArrayList<>(failed.size());
    for (Failure f : failed) {
      errors.add(f.description);
      logFailure(f);
    }
    if (tryMarkFailed(c, failed, errors)) {
      return;
    }
    for (int i = 0; i < failed.size(); i++) {
      List<Failure> one = List.of(failed.get(i));
      if (!tryMarkFailed(c, one, List.of(errors.get(i))) && !tryMarkFailed(c, one, List.of(UNSTORABLE_ERROR))) {
        LOG.warn("could not record the failed publish of " + failed.get(i).message.id()
            + "; it will be tried again without counting this attempt");
      }
    }
  }

  /** Marks {@code failed} behind a savepoint; false, with the savepoint rolled back, if the database refused. */
  private boolean tryMarkFailed(Connection c, List<Failure> failed, List<String> errors) throws SQLException {
    Savepoint before = c.setSavepoint();
    boolean marked;
    try {
      executeMarkFailed(c, failed, errors);
      marked = true;
    } catch (SQLException refused) {
      c.rollback(before); // throws on a lost connection: then the batch cannot commit anyway
      LOG.warn("the database refused to mark " + failed.size() + " failed publishes", refused);
      marked = false;
    }
    c.releaseSavepoint(before);
    return marked;
  }

  private void executeMarkFailed(Connection c, List<Failure> failed, List<String> errors) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(markFailedSql)) {
      for (int i = 0; i < failed.size(); i++) {
        Failure f = failed.get(i);
        ps.setInt(1, maxAttempts);
        ps.setString(2, errors.get(i));
        ps.setLong(3, backoffMicros(f.message.attempt()));
        setId(ps, 4, f.message.id(), mariadb);
        ps.addBatch();
      }
      ps.executeBatch();
    }
  }

  /**
   * The first inbox consumer of this database that already received {@code m} (so its effect
   * committed although the publish reported a failure: a lost acknowledgement), or null: asked
   * before a message is parked, so the operator is told at once. Behind a savepoint: a failed
   * look-up (which aborts a PostgreSQL transaction) must not cost the batch its marks; it is then
   * logged and taken as not known.
   */
  private String receivedBy(Connection c, OutboxMessage m) throws SQLException {
    Savepoint before = c.setSavepoint();
    try (PreparedStatement ps = c.prepareStatement(receivedBySql)) {
      setId(ps, 1, m.id(), mariadb);
      try (ResultSet rs = ps.executeQuery()) {
        String consumer = rs.next() ? rs.getString(1) : null;
        c.releaseSavepoint(before);
        return consumer;
      }
    } catch (SQLException e) {
      c.rollback(before);
      c.releaseSavepoint(before);
      LOG.warn("could not look up whether an inbox received outbox message " + m.id() + " before parking it", e);
      return null;
    }
  }

  /**
   * Logs a failed publish at WARN with the message id (and its parking, which needs an operator,
   * unless an inbox already received it); a logger that chokes on the exception must not fail the
   * batch.
   */
  private void logFailure(Failure f) {
    String parking = f.receivedBy == null ? "; parked until redriven"
        : "; parked, but inbox consumer " + f.receivedBy + " already received it: its effect committed"
            + " (the broker took the message; no redrive needed)";
    String what = "publish of outbox message " + f.message.id() + " (topic " + f.message.topic() + ") failed, attempt "
        + f.message.attempt() + " of " + maxAttempts + (parks(f) ? parking : "; it will be retried");
    try {
      LOG.warn(what, f.error);
    } catch (RuntimeException | StackOverflowError e) {
      LOG.warn(what + "; its exception could not be logged");
    }
  }

  private List<OutboxMessage> claim(Connection c) throws SQLException {
    List<OutboxMessage> batch = new ArrayList<>(batchSize);
    try (PreparedStatement ps = c.prepareStatement(claimSql)) {
      ps.setInt(1, batchSize);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          UUID id = getId(rs, 1, mariadb);
          batch.add(new OutboxMessageValue(
              id,
              rs.getString(2),
              rs.getString(3),
              rs.getBytes(4),
              mariadb
                  ? headers(JsonStrings.read(rs.getString(5), "header_names of " + id), JsonStrings.read(rs.getString(6), "header_values of " + id))
                  : headers((String[]) rs.getArray(5).getArray(), (String[]) rs.getArray(6).getArray()),
              DbTime.read(rs, 7, mariadb).toInstant(),
              rs.getInt(8) + 1));
        }
      }
    }
    return batch;
  }

  /** The headers in their order; {@link OutboxMessage} makes its own unmodifiable copy. */
  private static Map<String, String> headers(String[] names, String[] values) {
    if (names.length == 0) {
      return Map.of();
    }
    Map<String, String> h = new LinkedHashMap<>();
    for (int i = 0; i < names.length; i++) {
      h.put(names[i], values[i]);
    }
    return h;
  }

  /** Exponential back-off from the attempt that failed, with "equal jitter": half fixed, half random. */
  private long backoffMicros(int failedAttempt) {
    long base = DbTime.micros(initialBackoff);
    long cap = DbTime.micros(maxBackoff);
    int doublings = failedAttempt - 1;
    // base << doublings loses bits once they reach the sign bit (2^44 << 20 is 0, no back-off at
    // all): from there on it is past any cap anyway.
    long exp = doublings >= Long.numberOfLeadingZeros(base) - 1 ? cap : Math.min(cap, base << doublings);
    long half = exp / 2;
    return half + ThreadLocalRandom.current().nextLong(half + 1);
  }

  /**
   * The text stored as {@code last_error}: {@code e.toString()}, made storable. PostgreSQL refuses
   * NUL in text (the whole statement fails), so each NUL is written as its Java escape, a backslash
   * and {@code u0000}; the text is cut to {@value #MAX_ERROR_LENGTH} characters, never inside a
   * surrogate pair. A {@code toString()} that throws (a broken exception class, a cycle that
   * overflows the stack) gives the class name instead: the failure must still be counted, or the
   * message is never parked.
   */
  static String describe(Throwable e) {
    String s;
    try {
      s = e.toString();
      if (s == null) {
        s = e.getClass().getName(); // a toString() that returns null
      }
    } catch (Throwable broken) {
      Failures.rethrowIfFatal(broken); // out of memory: not this message's fault
      s = e.getClass().getName() + " (its toString() threw " + broken.getClass().getName() + ")";
    }
    if (s.indexOf('\0') >= 0) {
      s = s.replace("\0", "\\u0000");
    }
    if (s.length() <= MAX_ERROR_LENGTH) {
      return s;
    }
    int end = Character.isHighSurrogate(s.charAt(MAX_ERROR_LENGTH - 1)) ? MAX_ERROR_LENGTH - 1 : MAX_ERROR_LENGTH;
    return s.substring(0, end);
  }

  /**
   * Deletes sent messages older than the retention, in bounded batches (each its own short
   * transaction). The background loop calls it every minute.
   *
   * @return how many were deleted
   */
  public long purgeSent() {
    Field<OffsetDateTime> cutoff = DbTime.plusMicros(DbTime.clock(), DSL.val(-DbTime.micros(retention)));
    long n = Expiry.deleteInBatches(idem, T, STATUS.eq(SENT).and(SENT_AT.lt(cutoff)), PURGE_BATCH, PURGE_MAX_BATCHES);
    if (n > 0) {
      events.expired(n);
    }
    return n;
  }

  /**
   * Starts the background loop on a thread of the {@linkplain Builder#threadFactory thread
   * factory}: batches back to back while they send something, and after a batch that sent nothing
   * (nothing due, or every publish failed) a wait of the poll interval. Errors (a lost database) are
   * logged and retried after the poll interval. A relay stopped by {@link #close()} can be started
   * again.
   *
   * @throws IllegalStateException if already running, or if the previous loop was closed while a
   *     publish ignored the interrupt and has not ended yet
   */
  public synchronized void start() {
    if (loop != null) {
      if (loop.isAlive()) {
        throw new IllegalStateException(running ? "relay already started"
            : "relay's previous loop has not ended yet (a publish ignores the interrupt); start it again later");
      }
      loop = null;
    }
    running = true;
    Thread t = threads.newThread(this::loop);
    if (t == null) {
      running = false;
      throw new IllegalStateException("the relay's thread factory returned no thread");
    }
    loop = t;
    t.start();
  }

  /** Whether the background loop runs: started, not closed, and its thread alive. */
  public synchronized boolean isRunning() {
    return running && loop != null && loop.isAlive();
  }

  private void loop() {
    long nextPurge = System.nanoTime();
    long nextListen = System.nanoTime();
    boolean listenFailing = false;
    Listener listener = null;
    if (listen && mariadb) {
      LOG.info("MariaDB has no LISTEN: the relay polls every " + pollInterval);
    }
    try {
      while (running) {
        if (listen && !mariadb && listener == null && System.nanoTime() - nextListen >= 0) {
          // LISTEN before the batch, so nothing committed after it is missed. Apart from the batch:
          // a relay that cannot LISTEN (no connection to spare, a driver or pool that hides
          // PGConnection) still relays, by polling, and tries LISTEN again a poll interval later.
          try {
            listener = new Listener();
            if (listenFailing) {
              LOG.info("LISTEN for outbox messages works again");
              listenFailing = false;
            }
          } catch (RuntimeException e) {
            nextListen = System.nanoTime() + pollInterval.toNanos();
            // warn once per outage, not every poll interval
            String cannot = "could not LISTEN for outbox messages; polling every " + pollInterval + " and trying LISTEN again";
            if (listenFailing) {
              LOG.debug(cannot, e);
            } else {
              LOG.warn(cannot, e);
            }
            listenFailing = true;
          }
        }
        int n = 0;
        try {
          n = runOnce();
          if (System.nanoTime() - nextPurge >= 0) {
            nextPurge = System.nanoTime() + PURGE_EVERY.toNanos();
            purgeSent();
          }
        } catch (RuntimeException | Error e) {
          Failures.rethrowIfFatal(e); // the loop goes on after anything else, a stack overflow too
          LOG.warn("relay batch failed; trying again in " + pollInterval, e);
        }
        // Wait only after a batch that sent nothing (nothing due, everything failed, or an error).
        // "Not full" is no sign that nothing is left: an ordered batch takes one message per key,
        // so a backlog on one key would otherwise drain at one message per poll interval.
        if (n == 0 && running) {
          if (listener != null) {
            if (!listener.await(pollInterval)) {
              listener.close(); // a broken connection: poll once, then LISTEN on a new one
              listener = null;
              pause();
            }
          } else {
            pause();
          }
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      if (listener != null) {
        listener.close();
      }
    }
  }

  /** Waits the poll interval, or until {@link #close()}. */
  private void pause() throws InterruptedException {
    synchronized (wake) {
      if (running) {
        wake.wait(Math.max(1, pollInterval.toMillis()));
      }
    }
  }

  /**
   * A connection that LISTENs on the outbox's channel. Held by the background loop for as long as
   * it runs (one connection of the pool). Notifications are only hints: the loop polls anyway.
   */
  private final class Listener {
    private final Connection connection;
    private final PGConnection pg;

    Listener() {
      try {
        connection = idem.dataSource().getConnection();
      } catch (SQLException e) {
        throw new DataAccessException("could not get a connection to LISTEN on", e);
      }
      try {
        connection.setAutoCommit(true);
        pg = connection.unwrap(PGConnection.class);
        try (Statement st = connection.createStatement()) {
          st.execute(idem.dsl().render(DSL.query("LISTEN {0}", DSL.name(Outbox.channel(idem.schema())))));
        }
      } catch (SQLException e) {
        close();
        throw new DataAccessException("could not LISTEN for outbox messages: " + e.getMessage(), e);
      }
    }

    /** Waits for a notification up to {@code timeout}; false if the connection failed. */
    boolean await(Duration timeout) {
      try {
        pg.getNotifications((int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis())));
        return true;
      } catch (SQLException e) {
        LOG.warn("LISTEN connection failed; polling", e);
        return false;
      }
    }

    /**
     * Gives the connection back no longer listening: a pooled connection still LISTENing would
     * collect every later notification of the channel in the JVM, unread, for as long as the pool
     * keeps it. If {@code UNLISTEN} fails, the connection is aborted rather than handed back as it
     * is (a pool finds an aborted connection dead and drops it).
     */
    void close() {
      try (Statement st = connection.createStatement()) {
        st.execute("UNLISTEN *");
      } catch (SQLException e) {
        LOG.debug("could not UNLISTEN; aborting the LISTEN connection", e);
        try {
          connection.abort(Runnable::run);
        } catch (SQLException | RuntimeException abortFailed) {
          LOG.warn("could not UNLISTEN nor abort the LISTEN connection; it goes back to the pool listening", abortFailed);
        }
      }
      try {
        connection.close();
      } catch (SQLException e) {
        LOG.debug("could not close the LISTEN connection", e);
      }
    }
  }

  /**
   * Stops the background loop: the batch in progress finishes and commits, then the loop ends.
   * Waits for it four fifths of the {@linkplain Builder#shutdownTimeout shutdown timeout} (default
   * 10 s), then interrupts it and waits the last fifth. A publisher that
   * ignores the interrupt (a blocking socket write) is then left running: this logs a warning and
   * returns, so an application's shutdown is never held forever by a hung broker. That batch commits
   * its marks if it finishes later; if the process ends first, its messages stay unsent and are
   * published again by the next relay (at least once, as after a crash). Idempotent; a relay never
   * started closes at once; a closed relay can be {@linkplain #start() started} again.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      t = loop;
      running = false;
    }
    if (t == null) {
      return;
    }
    synchronized (wake) {
      wake.notifyAll();
    }
    if (listen && !mariadb) {
      wakeListeners();
    }
    // Most of the bound for the batch in progress to finish on its own; the rest for an interrupted
    // publish to give up, within shutdownTimeout (and Kubernetes' grace period).
    try {
      if (!Stopping.awaitEnd(t, shutdownTimeout, t::interrupt)) {
        LOG.warn("relay closed while its batch in progress still runs (a publish ignores the interrupt);"
            + " unmarked messages of that batch will be published again");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (this) {
      if (loop == t && !t.isAlive() && !running) {
        loop = null;
      }
    }
  }

  /** Ends the wait of a loop blocked in LISTEN (every listening relay of the schema wakes once). */
  private void wakeListeners() {
    try (Connection c = idem.dataSource().getConnection(); Statement st = c.createStatement()) {
      if (!c.getAutoCommit()) {
        c.setAutoCommit(true);
      }
      st.execute(idem.dsl().render(DSL.select(DSL.function("pg_notify", Object.class, DSL.inline(Outbox.channel(idem.schema())), DSL.inline("")))));
    } catch (SQLException | RuntimeException e) {
      LOG.debug("could not wake the LISTEN loop; it stops after its poll interval", e);
    }
  }

  /**
   * A failed publish; {@code description} is the error's text as stored and reported, made once;
   * {@code receivedBy}, for one that parks, the inbox consumer that already received the message
   * (its effect committed), else null.
   */
  private record Failure(OutboxMessage message, Throwable error, String description, String receivedBy) {
    Failure receivedBy(String consumer) {
      return new Failure(message, error, description, consumer);
    }
  }

  private static final ThreadFactory DAEMON = r -> {
    Thread t = new Thread(r, "idem-relay");
    t.setDaemon(true);
    return t;
  };

  /** Configures a {@link Relay}; validated and copied in {@link #build()}. */
  public static final class Builder {
    private final Context idem;
    private final Publisher publisher;
    private int batchSize = 100;
    private Duration pollInterval = Duration.ofMillis(500);
    private int maxAttempts = 10;
    private Duration initialBackoff = Duration.ofSeconds(1);
    private Duration maxBackoff = Duration.ofMinutes(5);
    private boolean ordered;
    private Duration retention = Duration.ofDays(7);
    private boolean listen;
    private ThreadFactory threads = DAEMON;
    private Duration shutdownTimeout = Duration.ofSeconds(10);

    private Builder(Context idem, Publisher publisher) {
      if (idem == null) {
        throw new IllegalArgumentException("idem must not be null");
      }
      if (publisher == null) {
        throw new IllegalArgumentException("publisher must not be null");
      }
      this.idem = idem;
      this.publisher = publisher;
    }

    /** Messages claimed and published per transaction; default 100. */
    public Builder batchSize(int batchSize) {
      this.batchSize = batchSize;
      return this;
    }

    /**
     * How long the background loop waits after a batch that sent nothing; default 500 ms, at most
     * {@link Relay#MAX_POLL_INTERVAL}.
     */
    public Builder pollInterval(Duration pollInterval) {
      this.pollInterval = pollInterval;
      return this;
    }

    /** Failed publishes after which a message is parked; default 10. */
    public Builder maxAttempts(int maxAttempts) {
      this.maxAttempts = maxAttempts;
      return this;
    }

    /**
     * The back-off after the first failure, doubling per failure up to {@code max}, each with
     * jitter (between half and all of it); default 1 s up to 5 min. Both at most {@link
     * Relay#MAX_BACKOFF}.
     */
    public Builder backoff(Duration initial, Duration max) {
      this.initialBackoff = initial;
      this.maxBackoff = max;
      return this;
    }

    /**
     * Keeps order per aggregate key: a message is published only after every older message of its
     * key was sent. Costs parallelism (one message per key per batch, so a backlog of one key is
     * one batch, one transaction, per message; relays share no key's backlog), and a failing or
     * parked message blocks its key until it goes out or is re-driven.
     * Messages without an aggregate key are unordered. Default false.
     */
    public Builder orderedByAggregateKey(boolean ordered) {
      this.ordered = ordered;
      return this;
    }

    /**
     * How long sent messages are kept before {@link Relay#purgeSent()} deletes them; default 7 days,
     * at most {@link Relay#MAX_RETENTION}.
     */
    public Builder retention(Duration retention) {
      this.retention = retention;
      return this;
    }

    /**
     * Makes the background loop LISTEN for enqueues through {@link Outbox#notifying()}, waking as
     * soon as one commits instead of at the next poll. Holds one connection of the pool while the
     * loop runs, besides the one each batch takes: the pool needs at least two. If LISTEN cannot
     * be set up (or its connection fails), the loop logs it, goes on polling and tries LISTEN again
     * a poll interval later. Default false.
     *
     * <p>PostgreSQL only: MariaDB has no {@code LISTEN}/{@code NOTIFY}, so there the loop polls at
     * its {@linkplain #pollInterval poll interval} whatever this says (and holds no extra
     * connection); every message still goes out, only the wake-up on enqueue is missing.
     */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /**
     * Makes the thread of the background loop ({@link Relay#start()}); one thread per start. Default:
     * a daemon thread named {@code idem-relay}. Give a virtual-thread factory ({@code
     * Thread.ofVirtual().name("idem-relay").factory()}, Java 21) or your platform's managed one.
     */
    public Builder threadFactory(ThreadFactory threads) {
      this.threads = threads;
      return this;
    }

    /**
     * How long {@link Relay#close()} waits for the batch in progress, interrupting it for the last
     * fifth; default 10 s, well inside Kubernetes' 30 s grace period. At most {@link
     * Relay#MAX_SHUTDOWN_TIMEOUT}.
     */
    public Builder shutdownTimeout(Duration timeout) {
      this.shutdownTimeout = timeout;
      return this;
    }

    /**
     * Checks the settings and builds the relay.
     *
     * @throws IllegalArgumentException naming the setting, if one is out of its range: a batch size
     *     outside 1 to 10,000, fewer than 1 attempt, a null or non-positive duration, a duration past
     *     its limit ({@link Relay#MAX_POLL_INTERVAL}, {@link Relay#MAX_BACKOFF}, {@link
     *     Relay#MAX_RETENTION}), or a maximum back-off shorter than the initial one
     */
    public Relay build() {
      if (batchSize < 1 || batchSize > 10_000) {
        throw new IllegalArgumentException("batchSize must be 1 to 10000, was " + batchSize);
      }
      checkDuration(pollInterval, "pollInterval", MAX_POLL_INTERVAL);
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be 1 or more, was " + maxAttempts);
      }
      checkDuration(initialBackoff, "initial backoff", MAX_BACKOFF);
      checkDuration(maxBackoff, "max backoff", MAX_BACKOFF);
      if (maxBackoff.compareTo(initialBackoff) < 0) {
        throw new IllegalArgumentException("max backoff " + maxBackoff + " is shorter than the initial backoff " + initialBackoff);
      }
      checkDuration(retention, "retention", MAX_RETENTION);
      Require.notNull(threads, "threadFactory");
      checkDuration(shutdownTimeout, "shutdownTimeout", MAX_SHUTDOWN_TIMEOUT);
      return new Relay(this);
    }

    private static void checkDuration(Duration d, String what, Duration max) {
      Require.atMost(Require.positive(d, what), max, what, "idem's limit for the relay");
    }
  }
}
