package dev.idem.jdbc.inbox;

import dev.idem.internal.Events;
import dev.idem.internal.Require;
import dev.idem.jdbc.ClaimOrder;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Tx;
import dev.idem.jdbc.TxConsumer;
import dev.idem.jdbc.internal.AtCommit;
import dev.idem.jdbc.internal.AutoCommit;
import dev.idem.jdbc.internal.ClaimRaced;
import dev.idem.jdbc.internal.ClaimTaken;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.internal.Expiry;
import dev.idem.jdbc.internal.Pipelined;
import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.jdbc.internal.Savepoints;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.key.IdempotencyKey;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertValuesStep4;
import org.jooq.Query;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The idempotent consumer: each message id is applied once per consumer. {@link #receive} claims
 * {@code (consumer, message id)} in the same transaction as the consumer's effect, so the claim and
 * the effect commit together or not at all: first, before the effect, by default; with the commit,
 * after it, with {@link Builder#claimOrder ClaimOrder.AT_COMMIT}.
 *
 * <pre>{@code
 * Inbox billing = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).build();
 * Outcome o = billing.receive(message.id(), tx -> charge(tx, message));
 * ack(message); // both APPLIED and ALREADY_DONE mean: done
 * }</pre>
 *
 * <p>Guarantees, observable as rows: for a message id received any number of times, by any number
 * of threads or processes at once, within the window, the effect's writes are committed exactly
 * once. A copy returns {@link Outcome#ALREADY_DONE} (never an error); a concurrent copy waits for
 * the first to commit or roll back and then answers. An effect that throws rolls back the claim
 * too, so a redelivery runs it again. With the default {@link ClaimOrder#BEFORE_EFFECT} a copy never
 * runs the effect; with {@link ClaimOrder#AT_COMMIT} a copy this inbox did not handle lately runs
 * it, and it is rolled back (see there).
 *
 * <p>Does not guarantee: anything outside the transaction. An effect that calls a remote service
 * may call it again when its transaction rolls back (or the process dies before commit). A copy
 * arriving after the {@link DedupeWindow} runs again: size the window beyond the broker's longest
 * redelivery (its retention, plus any replay you may do).
 *
 * <p>Thread-safe; immutable.
 */
public final class Inbox {
  static final String TABLE = "idem_inbox";
  static final Table<?> T = DSL.table(DSL.name("idem", TABLE));
  static final Field<String> CONSUMER = DSL.field(DSL.name("consumer"), SQLDataType.CLOB);
  static final Field<String> MESSAGE_ID = DSL.field(DSL.name("message_id"), SQLDataType.CLOB);
  static final Field<OffsetDateTime> RECEIVED_AT = DSL.field(DSL.name("received_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  static final Field<OffsetDateTime> EXPIRES_AT = DSL.field(DSL.name("expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);

  /** The savepoint a joined receive of statements sets in the same string as its claim. */
  private static final String SAVEPOINT = "idem_inbox_claim";
  private static final String COMMIT = "commit";
  private static final String RELEASE = "release savepoint " + SAVEPOINT;
  private static final String ROLLBACK_TO_SAVEPOINT = "rollback to savepoint " + SAVEPOINT + ";\n" + RELEASE;

  /** Rows deleted per expiry batch, and batches per {@link #expire()} call. */
  private static final int EXPIRE_BATCH = 1000;
  private static final int EXPIRE_MAX_BATCHES = 100;

  private final Idem idem;
  private final String consumer;
  private final DedupeWindow window;
  private final long windowMicros;
  private final Events events;
  private final boolean listening;
  private final ClaimOrder claimOrder;
  private final String claimSql;
  private final String claimAtCommitSql;
  /** The plain insert sent first in one string with the consumer's statements. */
  private final String claimFirstSql;
  /** {@link #claimFirstSql} behind a savepoint, for a receive that joins the caller's transaction. */
  private final String claimFirstJoinedSql;
  private final String ageSql;
  private final RecentKeys recent = new RecentKeys();

  private Inbox(Builder b) {
    this.idem = b.idem;
    this.consumer = b.consumer;
    this.window = b.window;
    this.windowMicros = toMicros(b.window.length());
    this.events = Events.to(idem.listener(), "inbox:" + consumer);
    this.listening = idem.listener() != dev.idem.event.IdemListener.NONE;
    this.claimOrder = b.claimOrder;
    DSLContext d = idem.dsl();
    // Received and expiring from one reading of the clock, so the row's window is exactly the
    // configured one; whether a row is past it is asked of the clock when the statement runs.
    Field<OffsetDateTime> expires = DbTime.plusMicros(DbTime.statementTime(), DSL.val(0L));
    // AT_COMMIT: the plain insert, then COMMIT, in one round trip. A row already there (or one
    // committed while this waited on it) is a unique violation, which makes PostgreSQL skip the
    // COMMIT: the transaction is rolled back, effect and all.
    this.claimFirstSql = d.render(insert(d, expires));
    this.claimAtCommitSql = claimFirstSql + ";\n" + COMMIT;
    this.claimFirstJoinedSql = "savepoint " + SAVEPOINT + ";\n" + claimFirstSql;
    // The claim: the row exists (and the effect must not run) unless this statement inserted it,
    // or found it expired and took it over. A concurrent claim of the same id waits on the row
    // lock until the first transaction ends, then sees its outcome: this is what runs the effect once.
    // (A builder of its own: jOOQ's builders are mutable, and the plain insert must stay plain.)
    this.claimSql = d.render(insert(d, expires)
        .onConflict(CONSUMER, MESSAGE_ID)
        .doUpdate()
        .set(RECEIVED_AT, DSL.excluded(RECEIVED_AT))
        .set(EXPIRES_AT, DSL.excluded(EXPIRES_AT))
        .where(DSL.field(DSL.name("idem_inbox", "expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE).lt(Expiry.dbNow())));
    // The age of the id's row, if it is there and within its window (a row past it is as good as gone),
    // in float8 seconds: date_part, not extract(), whose numeric arithmetic costs the server more.
    this.ageSql = d.render(d.select(DSL.field("date_part('epoch', {0} - {1})", Double.class, Expiry.dbNow(), RECEIVED_AT))
        .from(T)
        .where(CONSUMER.eq(DSL.val((String) null, CONSUMER)))
        .and(MESSAGE_ID.eq(DSL.val((String) null, MESSAGE_ID)))
        .and(EXPIRES_AT.ge(Expiry.dbNow())));
  }

  /** The claim's insert of {@code (consumer, message id)}, received now, expiring after the window. */
  private static InsertValuesStep4<?, String, String, OffsetDateTime, OffsetDateTime> insert(DSLContext d,
      Field<OffsetDateTime> expires) {
    return d.insertInto(T, CONSUMER, MESSAGE_ID, RECEIVED_AT, EXPIRES_AT)
        .values(DSL.val((String) null, CONSUMER), DSL.val((String) null, MESSAGE_ID), DbTime.statementTime(), expires);
  }

  /** Starts the configuration of {@code consumer}'s inbox. Prefer {@link Idem#inbox(String)}. */
  public static Builder builder(Idem idem, String consumer) {
    return new Builder(idem, consumer);
  }

  /** The consumer this inbox deduplicates for. */
  public String consumer() {
    return consumer;
  }

  /** How long a message id is remembered. */
  public DedupeWindow window() {
    return window;
  }

  /**
   * Applies {@code effect} for {@code messageId} unless this consumer already did, in one
   * transaction with the claim. Joins the idem transaction open on this thread, if any (as {@link
   * #receive(Connection, String, TxConsumer)} does), else opens its own.
   *
   * @return {@link Outcome#APPLIED} if the effect ran and committed, {@link Outcome#ALREADY_DONE}
   *     if the message was received before (the effect did not run)
   * @throws X what the effect threw, after rolling the claim back with it
   * @throws IllegalArgumentException if {@code messageId} is not a valid id or {@code effect} is null
   */
  public <X extends Exception> Outcome receive(String messageId, TxConsumer<X> effect) throws X {
    check(messageId, effect);
    Tx open = idem.currentTransaction();
    if (open != null) {
      return joined(open, messageId, effect, null);
    }
    return owned(messageId, effect, null);
  }

  /**
   * Applies {@code statements} for {@code messageId} unless this consumer already did: the effect
   * given as jOOQ statements rather than a callback, for a consumer whose effect is only writes.
   * The claim of the id, the statements and {@code COMMIT} go to PostgreSQL as one string, in one
   * round trip, the claim first: an id that has a row (or gets one while the claim waits for
   * another copy) fails the claim with a unique violation, PostgreSQL skips the statements, and the
   * receive is answered as {@link #receive(String, TxConsumer)} answers a copy, with the claim in a
   * round trip of its own. So a copy never runs a statement, and a new message costs one round trip
   * where a bare transaction of the same statements costs two. Joins the idem transaction open on
   * this thread, if any, as {@link #receive(Connection, String, Query...)} does.
   *
   * <pre>{@code
   * Outcome o = billing.receive(message.id(),
   *     dsl.insertInto(CHARGE).set(CHARGE.ORDER_ID, order).set(CHARGE.AMOUNT, amount));
   * }</pre>
   *
   * <p>The statements run in order; the first that fails rolls back everything, the claim included,
   * and its failure is thrown, so a redelivery runs them again. A serialization failure or deadlock
   * makes the receive again with the claim in a round trip of its own, which retries as {@link
   * #receive(String, TxConsumer)} does, so the statements may be sent more than once, never
   * committed more than once. What a statement returns is discarded. A statement must not end
   * or split the transaction ({@code COMMIT}, {@code ROLLBACK}, {@code SAVEPOINT}).
   *
   * @param statements the effect, rendered and bound by idem's jOOQ configuration
   * @return {@link Outcome#APPLIED} if the statements committed now, {@link Outcome#ALREADY_DONE}
   *     if the message was received before (no statement ran)
   * @throws IllegalArgumentException if {@code messageId} is not a valid id, or {@code statements}
   *     is null, empty or holds a null, or jOOQ cannot render or bind one of them (the statements
   *     are not sent; nothing of the receive commits)
   * @throws DataAccessException what a statement (or the commit's deferred checks) failed with,
   *     after rolling it back with the claim
   */
  public Outcome receive(String messageId, Query... statements) {
    IdempotencyKey.check("message id", messageId);
    Query[] effect = Pipelined.checked(statements, "statements");
    Tx open = idem.currentTransaction();
    if (open != null) {
      return joined(open, messageId, sent(effect), effect);
    }
    return owned(messageId, sent(effect), effect);
  }

  /**
   * {@link #receive(String, Query...)} inside the caller's transaction on {@code callerTx}, which
   * stays open, under a savepoint: the savepoint, the claim, the statements and the release of the
   * savepoint go in one round trip. APPLIED means "applied in your transaction".
   *
   * @throws IllegalArgumentException also if {@code callerTx} is null, in auto-commit mode or aborted
   */
  public Outcome receive(Connection callerTx, String messageId, Query... statements) {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    IdempotencyKey.check("message id", messageId);
    Query[] effect = Pipelined.checked(statements, "statements");
    return joined(callerTx, messageId, sent(effect), effect);
  }

  /**
   * A receive with no transaction open on this thread: an id handled lately is read first (one
   * auto-commit read answers most redeliveries); any other is claimed as the claim order, or the
   * statements ({@code statements} not null), have it.
   */
  private <X extends Exception> Outcome owned(String messageId, TxConsumer<X> effect, Query[] statements) throws X {
    Duration[] age = new Duration[1];
    Outcome outcome;
    if (recent.mightContain(consumer, messageId) && (age[0] = autocommit(c -> age(c, messageId))) != null) {
      // An id this inbox handled lately, most likely a redelivery: one auto-commit read answers it.
      outcome = Outcome.ALREADY_DONE;
    } else if (statements != null) {
      outcome = sentWithClaim(messageId, effect, statements, age);
    } else if (claimOrder == ClaimOrder.AT_COMMIT) {
      outcome = applyThenClaim(messageId, effect, age);
    } else {
      outcome = claimFirst(messageId, effect, age);
    }
    recent.remember(consumer, messageId);
    report(outcome, messageId, age[0]);
    return outcome;
  }

  /** {@link ClaimOrder#BEFORE_EFFECT} in a transaction of idem's: the claim, then the effect. */
  private <X extends Exception> Outcome claimFirst(String messageId, TxConsumer<X> effect, Duration[] age) throws X {
    return ClaimRaced.rerun(idem, tx -> claimThenApply(tx, messageId, effect, age, true));
  }

  /**
   * The claim, the statements and {@code COMMIT} in one round trip. If the claim conflicted (or
   * the transaction failed with 40001 or 40P01), the receive is made again with the claim in a
   * round trip of its own: it finds the id done, waits for a copy still running, or takes over a
   * row past its window, and then sends {@code effect}, the same statements.
   */
  private <X extends Exception> Outcome sentWithClaim(String messageId, TxConsumer<X> effect, Query[] statements,
      Duration[] age) throws X {
    try {
      return idem.inTransaction(tx -> {
        send(prepared(tx.connection(), claimFirstSql, messageId, statements, COMMIT), messageId, true);
        return Outcome.APPLIED;
      });
    } catch (ClaimTaken taken) {
      return claimFirst(messageId, effect, age);
    }
  }

  /**
   * The claim, {@code statements} and {@code tail}, rendered and bound, not sent: a statement
   * jOOQ cannot render or bind is an {@link IllegalArgumentException} here, before any SQL.
   */
  private Pipelined prepared(Connection c, String claim, String messageId, Query[] statements, String tail) {
    try {
      return Pipelined.prepare(c, idem.dsl(), claim, new Object[] {consumer, messageId, windowMicros}, statements, tail);
    } catch (SQLException e) {
      throw new DataAccessException("inbox " + consumer + ", message " + messageId + ": " + e.getMessage(), e);
    }
  }

  /**
   * Sends {@code string} and closes it. In idem's own transaction ({@code owned}) a serialization
   * failure or deadlock is {@link ClaimTaken}: the receive is made again with the claim in a round
   * trip of its own, which retries as a callback's claim does. In the caller's transaction it is
   * thrown: only the caller can retry its transaction.
   */
  private void send(Pipelined string, String messageId, boolean owned) {
    try (string) {
      string.send(idem.schema(), TABLE);
    } catch (SQLException e) {
      if (owned && SqlStates.isRetryable(e)) {
        throw new ClaimTaken();
      }
      throw new DataAccessException("inbox " + consumer + ", message " + messageId + ": " + e.getMessage(), e);
    }
  }

  /** The statements as a callback, for a receive whose claim took a round trip of its own. */
  private TxConsumer<RuntimeException> sent(Query[] statements) {
    return tx -> {
      try {
        Pipelined.run(tx.connection(), idem.dsl(), statements);
      } catch (SQLException e) {
        throw new DataAccessException("inbox " + consumer + ": " + e.getMessage(), e);
      }
    };
  }

  /**
   * {@link ClaimOrder#AT_COMMIT}: the effect, then the id's row and {@code COMMIT} in one round
   * trip. If the row conflicts, everything rolls back and the claim is made again before the
   * effect (it waits for a copy still running, takes over a row past its window, or finds the id
   * done). If the effect fails, and that is because the id was done meanwhile (a copy committed
   * first; the effect ran into its rows), the answer is ALREADY_DONE; otherwise the failure.
   */
  private <X extends Exception> Outcome applyThenClaim(String messageId, TxConsumer<X> effect, Duration[] age) throws X {
    return AtCommit.run(idem,
        tx -> {
          effect.accept(tx);
          claimAtCommit(tx.connection(), messageId);
          return Outcome.APPLIED;
        },
        () -> ClaimRaced.rerun(idem, tx -> claimThenApply(tx, messageId, effect, age, true)),
        failure -> {
          Duration done;
          try {
            done = autocommit(c -> age(c, messageId));
          } catch (RuntimeException e) {
            failure.addSuppressed(e);
            return null;
          }
          if (done == null) {
            return null; // not a repeat: the effect's own failure
          }
          age[0] = done;
          return Outcome.ALREADY_DONE;
        },
        () -> "inbox " + consumer + ", message " + messageId);
  }


  /**
   * {@link #receive(String, TxConsumer)} inside the caller's transaction on {@code callerTx}, which
   * stays open: the caller commits (the claim and the effect with their own work) or rolls back.
   * The claim and effect run under a savepoint, so an effect that throws frees the id and undoes
   * its own writes without aborting the caller's transaction.
   *
   * <p>An APPLIED outcome here means "applied in your transaction": it counts only if the caller
   * commits.
   *
   * @throws IllegalArgumentException also if {@code callerTx} is null, in auto-commit mode or aborted
   */
  public <X extends Exception> Outcome receive(Connection callerTx, String messageId, TxConsumer<X> effect) throws X {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    check(messageId, effect);
    return joined(callerTx, messageId, effect, null);
  }

  /** A joined receive on {@code callerTx}, its arguments checked. */
  private <X extends Exception> Outcome joined(Connection callerTx, String messageId, TxConsumer<X> effect,
      Query[] statements) throws X {
    try {
      if (callerTx.getAutoCommit()) {
        throw new IllegalArgumentException("callerTx is in auto-commit mode: open a transaction first (setAutoCommit(false))");
      }
    } catch (SQLException e) {
      throw new DataAccessException("could not read the auto-commit mode of callerTx", e);
    }
    Tx open = idem.currentTransaction();
    Tx tx = open != null && open.connection() == callerTx ? open : new JoinedTx(callerTx, idem.dsl(callerTx));
    return joined(tx, messageId, effect, statements);
  }

  /**
   * The claim and the effect under a savepoint of the caller's transaction: {@code statements} (if
   * not null) sent with the claim first; if the id has a row, or there is no statement to send,
   * the claim in a round trip of its own, then {@code effect}.
   */
  private <X extends Exception> Outcome joined(Tx tx, String messageId, TxConsumer<X> effect, Query[] statements) throws X {
    Duration[] age = new Duration[1];
    Driver.refuseAborted(tx.connection(), "message", messageId);
    Outcome outcome = null;
    if (statements != null) {
      // Rendered and bound first: a statement refused here sent nothing, not even the savepoint,
      // so there is nothing to roll back to.
      outcome = sentWithClaimJoined(tx.connection(), messageId,
          prepared(tx.connection(), claimFirstJoinedSql, messageId, statements, RELEASE));
    }
    if (outcome == null) {
      outcome = Savepoints.around(tx.connection(), "message " + messageId, () -> claimThenApply(tx, messageId, effect, age, false));
    }
    report(outcome, messageId, age[0]);
    return outcome;
  }

  /**
   * Sends the savepoint, the claim, the statements and the release, in one round trip: APPLIED, or
   * null if the id has a row (then the caller's transaction is back where it was). On any other
   * failure it is rolled back to the savepoint and the failure thrown.
   */
  private Outcome sentWithClaimJoined(Connection c, String messageId, Pipelined string) {
    try {
      send(string, messageId, false);
      return Outcome.APPLIED;
    } catch (ClaimTaken taken) {
      rollbackToSavepoint(c, messageId);
      return null;
    } catch (RuntimeException e) {
      try {
        rollbackToSavepoint(c, messageId);
      } catch (RuntimeException again) {
        e.addSuppressed(again);
      }
      throw e;
    }
  }

  private void rollbackToSavepoint(Connection c, String messageId) {
    try (Statement st = c.createStatement()) {
      st.execute(ROLLBACK_TO_SAVEPOINT);
    } catch (SQLException e) {
      throw new DataAccessException("inbox " + consumer + ": could not roll back to the savepoint before the claim of"
          + " message " + messageId + ", so your transaction may hold it or be aborted; roll it back: " + e.getMessage(), e);
    }
  }

  /**
   * {@link ClaimOrder#BEFORE_EFFECT}: the claim, then the effect if this transaction won it. For a
   * repeat, the age of the first copy is read in the same transaction (only when a listener wants
   * it), so it sees the row the claim just waited for. {@code owned}: the transaction is this
   * call's, so a claim that lost a race (40001 before the effect ran) is {@link ClaimRaced}.
   */
  private <X extends Exception> Outcome claimThenApply(Tx tx, String messageId, TxConsumer<X> effect, Duration[] age,
      boolean owned) throws X {
    if (claim(tx.connection(), messageId, owned)) {
      effect.accept(tx);
      return Outcome.APPLIED;
    }
    if (listening) {
      Duration first = age(tx.connection(), messageId);
      age[0] = first == null ? Duration.ZERO : first;
    }
    return Outcome.ALREADY_DONE;
  }

  /** The AT_COMMIT claim and the commit; {@link ClaimTaken} if another copy's row is there. */
  private void claimAtCommit(Connection c, String messageId) {
    try (PreparedStatement ps = c.prepareStatement(claimAtCommitSql)) {
      ps.setString(1, consumer);
      ps.setString(2, messageId);
      ps.setLong(3, windowMicros);
      ps.execute();
    } catch (SQLException e) {
      if (SqlStates.isUniqueViolationOn(e, idem.schema(), TABLE)) {
        throw new ClaimTaken();
      }
      throw new DataAccessException("could not claim message " + messageId + " for " + consumer + ": " + e.getMessage(), e);
    }
  }

  /** True if this transaction now holds the claim of {@code messageId}. */
  private boolean claim(Connection c, String messageId, boolean owned) {
    try (PreparedStatement ps = c.prepareStatement(claimSql)) {
      ps.setString(1, consumer);
      ps.setString(2, messageId);
      ps.setLong(3, windowMicros);
      return ps.executeUpdate() == 1;
    } catch (SQLException e) {
      throw ClaimRaced.orFailure(owned, new DataAccessException("could not claim message " + messageId + " for "
          + consumer + ": " + e.getMessage(), e));
    }
  }

  private void report(Outcome outcome, String messageId, Duration age) {
    if (!listening) {
      return;
    }
    IdempotencyKey key = IdempotencyKey.of(consumer, messageId);
    if (outcome == Outcome.APPLIED) {
      events.applied(key);
    } else {
      events.replayed(key, age == null ? Duration.ZERO : age, window);
    }
  }

  /**
   * How long ago the message was first received, by the database clock, if its row is there and
   * within its window; null if not (never received, rolled back, or past the window).
   */
  private Duration age(Connection c, String messageId) {
    try (PreparedStatement ps = c.prepareStatement(ageSql)) {
      ps.setString(1, consumer);
      ps.setString(2, messageId);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Duration.ofNanos((long) (rs.getDouble(1) * 1e9)) : null;
      }
    } catch (SQLException e) {
      // only an event's detail depends on it; but a failed statement aborts the transaction, so say so
      throw new DataAccessException("could not read the age of message " + messageId + ": " + e.getMessage(), e);
    }
  }

  /**
   * Deletes this consumer's message ids older than the window, in bounded batches (each its own
   * short transaction). A copy of a deleted id would run again.
   *
   * @return the number of ids deleted (at most 100,000 per call; call again if it returned that)
   */
  public long expire() {
    long n = Expiry.deleteInBatches(idem, T, CONSUMER.eq(consumer).and(EXPIRES_AT.lt(Expiry.dbNow())), EXPIRE_BATCH, EXPIRE_MAX_BATCHES);
    if (n > 0) {
      events.expired(n);
    }
    return n;
  }

  /**
   * Runs a read on a connection of its own in auto-commit mode: it sees what others committed. Run
   * again on 40001 (a SERIALIZABLE pool can abort even a lone read), as a read may be.
   */
  private <R> R autocommit(AutoCommit.Work<R> work) {
    return AutoCommit.runAgainOnSerializationFailure(idem.dataSource(), "inbox " + consumer, work);
  }

  private void check(String messageId, Object effect) {
    IdempotencyKey.check("message id", messageId);
    if (effect == null) {
      throw new IllegalArgumentException("effect must not be null");
    }
  }

  private static long toMicros(Duration d) {
    try {
      return DbTime.micros(d);
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException("dedupe window " + d + " is too long", e);
    }
  }

  private record JoinedTx(Connection connection, DSLContext dsl) implements Tx {}

  /** Configures an {@link Inbox}; validated and copied in {@link #build()}. */
  public static final class Builder {
    private final Idem idem;
    private final String consumer;
    private DedupeWindow window;
    private ClaimOrder claimOrder = ClaimOrder.BEFORE_EFFECT;

    private Builder(Idem idem, String consumer) {
      if (idem == null) {
        throw new IllegalArgumentException("idem must not be null");
      }
      this.idem = idem;
      this.consumer = consumer;
    }

    /**
     * How long a message id is remembered (required), by the database clock; at most 100 years.
     * Make it longer than the longest time a copy can arrive after the first: the broker's
     * retention and redelivery, plus any replay.
     */
    public Builder window(DedupeWindow window) {
      this.window = window;
      return this;
    }

    /**
     * When the message id's row is written in a transaction the inbox owns: {@link
     * ClaimOrder#BEFORE_EFFECT} (default; a copy never runs the effect) or {@link
     * ClaimOrder#AT_COMMIT} (one round trip fewer per new message; a copy this inbox did not
     * handle lately runs the effect, which is rolled back). Either way the effect's writes commit
     * once per id. A receive that joins a caller's transaction, and one given statements ({@link
     * Inbox#receive(String, Query...)}), always claims first.
     */
    public Builder claimOrder(ClaimOrder order) {
      this.claimOrder = order;
      return this;
    }

    /**
     * @throws IllegalArgumentException if the consumer name is invalid, no window was set, the
     *     window is longer than 100 years, or the claim order is null
     */
    public Inbox build() {
      IdempotencyKey.check("consumer", consumer);
      Require.notNull(claimOrder, "claimOrder");
      if (window == null) {
        throw new IllegalArgumentException("window must be set: how long after the first copy can the last copy of a message arrive?");
      }
      DbTime.bounded(window.length(), "window");
      return new Inbox(this);
    }
  }
}
