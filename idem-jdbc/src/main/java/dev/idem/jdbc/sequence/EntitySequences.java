package dev.idem.jdbc.sequence;

import dev.idem.internal.Events;
import dev.idem.internal.Require;
import dev.idem.jdbc.claim.ClaimTable;
import dev.idem.jdbc.claim.Sql;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxConsumer;
import dev.idem.jdbc.internal.Savepoints;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.InFlightException;
import dev.idem.transition.Outcome;
import dev.idem.transition.SequenceRule;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The per-entity sequence rule ({@link SequenceRule}) on PostgreSQL, for one stream of events:
 * an event numbered {@code seq} for an entity is applied only if {@code seq} is greater than the
 * highest applied so far, kept in {@code idem_sequences}, one row per entity, forever.
 *
 * <pre>{@code
 * EntitySequences prices = idem.sequences("price-updates");
 * Outcome o = prices.applyIfNewer("sku-42", event.seq(), tx -> ...write the price...);
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>The check and the record are one statement (an upsert that only raises {@code
 *       last_applied}), in the same transaction as the effect: of any number of copies of an event
 *       racing on any number of connections, one runs the effect; an exception in the effect rolls
 *       the record back with it.
 *   <li>An event with a number at or below the highest applied is {@link Outcome#ALREADY_DONE}, and
 *       its effect does not run: repeats and late, out-of-order events are absorbed with no dedupe
 *       window and one number per entity.
 *   <li>An event at or below the highest committed number writes nothing (no lock on the entity's
 *       row, no transaction id) and does not wait for a copy of a newer event still running.
 * </ul>
 *
 * <h2>Where it stops</h2>
 *
 * <ul>
 *   <li>It needs a producer that numbers each entity's events in the order they happened (one
 *       writer per entity, or a number taken from the entity's own version). Numbers from several
 *       unordered producers make it drop real events as "old".
 *   <li>It does not detect gaps: 5 after 3 is applied, and 4 arriving later is then ignored. Use it
 *       where each event carries the entity's whole state (a price, a position), not a delta.
 * </ul>
 *
 * <h2>Events</h2>
 *
 * With a listener on {@code Idem}, every call that returns an outcome emits one event with source
 * {@code "sequences:<stream>"} and key {@code (stream, entity)}: {@link
 * dev.idem.event.IdemEvent.Applied} when the number was newer and the effect ran, {@link
 * dev.idem.event.IdemEvent.SequenceIgnored} (with the number) when it was not. It is delivered after
 * the outcome is decided: after commit when the call owns its transaction; in a call that joined
 * yours (a {@code Connection}, or inside {@code Idem.inTransaction}), once the number
 * is recorded there, so an {@code Applied} counts only if you commit. An effect that throws emits
 * nothing. With no listener no event is built.
 *
 * <p>Thread-safe and immutable.
 */
public final class EntitySequences {
  private static final Table<?> SEQUENCES = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_sequences")).as("s");
  private static final Field<String> STREAM = DSL.field(DSL.name("stream"), String.class);
  private static final Field<String> ENTITY = DSL.field(DSL.name("entity"), String.class);
  private static final Field<Long> LAST_APPLIED = DSL.field(DSL.name("last_applied"), Long.class);
  private static final Field<Long> S_LAST_APPLIED = DSL.field(DSL.name("s", "last_applied"), Long.class);
  private static final Table<?> SEEN = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_sequences")).as("seen");
  private static final Field<String> SEEN_STREAM = DSL.field(DSL.name("seen", "stream"), String.class);
  private static final Field<String> SEEN_ENTITY = DSL.field(DSL.name("seen", "entity"), String.class);
  private static final Field<Long> SEEN_LAST_APPLIED = DSL.field(DSL.name("seen", "last_applied"), Long.class);

  /**
   * The longest a call waits for another copy of an event of the same entity that is still running
   * (its transaction holds the entity's row): then it throws {@link InFlightException}, having
   * recorded nothing; the caller leaves the event unacknowledged and it comes again.
   */
  public static final Duration WAIT = Duration.ofSeconds(2);

  private static final Duration RETRY_AFTER = Duration.ofSeconds(1);

  private final Context idem;
  private final String stream;
  private final Events events;
  // Rendered once (binds: stream, entity, seq): the hot path runs it as a plain PreparedStatement.
  private final String claim;

  private EntitySequences(Context idem, String stream) {
    this.idem = Require.notNull(idem, "idem");
    this.stream = IdempotencyKey.check("stream", stream);
    this.events = Events.to(idem.listener(), "sequences:" + stream);
    DSLContext dsl = idem.dsl();
    // A number at or below the one this statement's snapshot sees is answered without the upsert,
    // which would lock the entity's row (a transaction id, a written lock and a flushed commit) to
    // change nothing: last_applied only grows, so what the snapshot shows is a floor. Anything
    // else goes to the upsert, which decides against the latest committed row.
    Condition seen = SEEN_STREAM.eq((String) null).and(SEEN_ENTITY.eq((String) null)).and(SEEN_LAST_APPLIED.ge((Long) null));
    this.claim = ClaimTable.boundedWait(dsl, WAIT).text() + ";\n" + dsl.render(dsl.insertInto(SEQUENCES, STREAM, ENTITY, LAST_APPLIED)
        .select(DSL.select(DSL.val((String) null), DSL.val((String) null), DSL.val((Long) null))
            .whereNotExists(DSL.selectOne().from(SEEN).where(seen)))
        .onConflict(STREAM, ENTITY)
        .doUpdate()
        .set(LAST_APPLIED, DSL.excluded(LAST_APPLIED))
        .where(S_LAST_APPLIED.lt(DSL.excluded(LAST_APPLIED)))
        .returning(LAST_APPLIED)) + ";\n" + dsl.render(DSL.select(ClaimTable.RESTORED));
  }

  /** For {@code Idem.sequences(stream)}: the way to get them. Not an API. */
  public static EntitySequences of(Context idem, String stream) {
    return new EntitySequences(idem, stream);
  }

  /** The stream these sequences number events of. */
  public String stream() {
    return stream;
  }

  /**
   * In a transaction of its own (or the one open on this thread), records {@code seq} for {@code
   * entity} and runs {@code effect}, if {@code seq} is above the highest applied.
   *
   * @param entity the entity the event is about, checked like an idempotency key
   * @param seq the event's number for this entity, 1 or more
   * @return {@link Outcome#APPLIED} if the effect ran and committed with the record (recorded in
   *     the open transaction, when it joined one), {@link Outcome#ALREADY_DONE} if {@code seq} was
   *     not newer (the effect did not run)
   * @throws X what {@code effect} threw; the transaction rolled back and nothing was recorded
   * @throws InFlightException if another copy of an event of this entity held its row for longer
   *     than {@link #WAIT}; nothing was recorded: leave the event unacknowledged
   */
  public <X extends Exception> Outcome applyIfNewer(String entity, long seq, TxConsumer<X> effect) throws X {
    check(entity, seq, effect);
    Tx open = idem.current();
    Outcome outcome = open != null ? applyInSavepoint(open, entity, seq, effect)
        : owned(entity, seq, effect);
    events.sequence(stream, entity, seq, outcome); // owned: after commit; joined: recorded, not committed
    return outcome;
  }

  /**
   * {@link #applyIfNewer(String, long, TxConsumer)} in the caller's transaction on {@code tx}: the
   * record and the effect commit or roll back with it. If {@code effect} throws, the record is
   * rolled back to a savepoint set before it, so the caller's transaction stays usable and a
   * redelivery of the event applies it.
   *
   * <p>An {@link Outcome#APPLIED} here (and its {@code Applied} event) means "recorded in your
   * transaction": it counts only if you commit.
   *
   * @throws InFlightException as the form without a connection does; your transaction stays usable
   * @throws IllegalArgumentException if {@code tx} is in auto-commit mode: the record would commit
   *     alone, before the effect
   */
  public <X extends Exception> Outcome applyIfNewer(Connection tx, String entity, long seq, TxConsumer<X> effect)
      throws X {
    check(entity, seq, effect);
    Outcome outcome = applyInSavepoint(idem.joined(tx, "sequence " + seq + " of " + stream + "/" + entity), entity, seq, effect);
    events.sequence(stream, entity, seq, outcome);
    return outcome;
  }

  /**
   * In a transaction of idem's own: a run whose record raced another copy's (40001 at REPEATABLE
   * READ or SERIALIZABLE, before the effect ran) runs again apart from the retry budget, and then
   * finds the raised number.
   */
  private <X extends Exception> Outcome owned(String entity, long seq, TxConsumer<X> effect) throws X {
    boolean[] ran = new boolean[1];
    return idem.owned(tx -> {
      ran[0] = false;
      return apply(tx, entity, seq, t -> {
        ran[0] = true;
        effect.accept(t);
      });
    }, () -> ran[0]);
  }

  /** The highest sequence number applied for {@code entity}, or 0 if none. */
  public long lastApplied(String entity) {
    IdempotencyKey.check("entity", entity);
    return idem.inTransaction(tx -> tx.dsl()
        .select(LAST_APPLIED)
        .from(SEQUENCES)
        .where(STREAM.eq(stream))
        .and(ENTITY.eq(entity))
        .fetchOptional(LAST_APPLIED)
        .orElse(0L));
  }

  /**
   * {@link #apply} in a caller's transaction: a failing effect must not leave the raised number
   * there (the caller may catch and commit, and the event would then be lost).
   */
  private <X extends Exception> Outcome applyInSavepoint(Tx tx, String entity, long seq, TxConsumer<X> effect)
      throws X {
    return Savepoints.around(tx.connection(), "sequence " + seq + " of " + stream + "/" + entity,
        () -> apply(tx, entity, seq, effect));
  }

  /**
   * Records {@code seq} if newer, then runs {@code effect}. In a transaction of idem's own, a claim
   * that raced another copy's (40001 at REPEATABLE READ or SERIALIZABLE) runs again within the
   * retry budget and then finds the raised number.
   */
  private <X extends Exception> Outcome apply(Tx tx, String entity, long seq, TxConsumer<X> effect) throws X {
    boolean newer;
    // The upsert raises last_applied only when seq is greater (SequenceRule.shouldApply); a copy
    // racing on the same entity waits for the first one's row lock and then finds the raised value.
    // The record waits at most WAIT for a copy in flight (its lock_timeout set, and restored, in
    // the same string): then the copy is answered in flight rather than held.
    try (PreparedStatement ps = tx.connection().prepareStatement(claim)) {
      ps.setString(1, stream); // the row the upsert writes
      ps.setString(2, entity);
      ps.setLong(3, seq);
      ps.setString(4, stream); // the row as this statement's snapshot sees it
      ps.setString(5, entity);
      ps.setLong(6, seq);
      try (ResultSet rs = Sql.resultAt(ps, 1)) {
        newer = rs.next();
      }
    } catch (SQLException e) {
      if (SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE)) {
        throw new InFlightException("sequence " + seq + " of " + stream + "/" + entity, RETRY_AFTER);
      }
      throw new DataAccessException("recording sequence " + seq + " of " + stream + "/" + entity + " failed: "
          + e.getMessage(), e);
    }
    if (!newer) {
      return Outcome.ALREADY_DONE;
    }
    effect.accept(tx);
    return Outcome.APPLIED;
  }

  private static void check(String entity, long seq, TxConsumer<?> effect) {
    IdempotencyKey.check("entity", entity);
    if (seq < 1) {
      throw new IllegalArgumentException("seq must be 1 or more, was " + seq);
    }
    Require.notNull(effect, "effect");
  }

}
