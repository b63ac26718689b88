package dev.idem.jdbc.sequence;

import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.claim.Binds;
import dev.idem.jdbc.internal.claim.ClaimTable;
import dev.idem.jdbc.internal.claim.Claims;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxConsumer;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.result.InFlightException;
import dev.idem.transition.Outcome;
import dev.idem.transition.SequenceRule;
import java.sql.Connection;
import java.time.Duration;
import org.jooq.Field;
import org.jooq.Table;
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
 *       the record back with it. This is idem's claim engine, the executor's and the inbox's: the
 *       same transactions, retry budget, bounded wait and savepoint in yours; the claim raises a
 *       number instead of inserting a key.
 *   <li>An event with a number at or below the highest applied is {@link Outcome#ALREADY_DONE}, and
 *       its effect does not run: repeats and late, out-of-order events are absorbed with no dedupe
 *       window and one number per entity.
 *   <li>An event at or below the highest committed number writes nothing (no lock on the entity's
 *       row, no transaction id) and does not wait for a copy of a newer event still running. When
 *       most of a stream's events lately were repeats, a call that owns its transaction reads the
 *       number first (one auto-commit read, as the inbox does) and opens no transaction for a repeat.
 *   <li>An effect that applies an event of the same stream and entity again, from inside its own
 *       effect, is refused ({@link IllegalStateException}): its row is the outer call's, uncommitted.
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
  private static final Table<?> SEQUENCES = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_sequences"));
  private static final Field<String> STREAM = DSL.field(DSL.name("stream"), String.class);
  private static final Field<String> ENTITY = DSL.field(DSL.name("entity"), String.class);
  private static final Field<Long> LAST_APPLIED = DSL.field(DSL.name("last_applied"), Long.class);

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
  /** The claim engine on idem_sequences; it emits no events of its own (these emit theirs, with the number). */
  private final Claims claims;

  private EntitySequences(Context idem, String stream) {
    this.idem = Require.notNull(idem, "idem");
    this.stream = IdempotencyKey.check("stream", stream);
    this.events = Events.to(idem.listener(), "sequences:" + stream);
    this.claims = new Claims(idem, new ClaimTable(idem, ClaimTable.Layout.SEQUENCES, null, WAIT, null), Events.NONE,
        null, RETRY_AFTER, "sequences:" + stream);
  }

  static {
    Factories.register(EntitySequences.class, String.class, EntitySequences.class, EntitySequences::new);
  }

  /** The stream these sequences number events of. */
  String stream() {
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
   * @throws IllegalStateException if called from the effect of an event of the same entity
   */
  public <X extends Exception> Outcome applyIfNewer(String entity, long seq, TxConsumer<X> effect) throws X {
    check(entity, seq, effect);
    return decided(entity, seq, claims.execute(null, binds(entity, seq), Codec.none(), Claims.callback(effect), null));
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
   * @throws IllegalArgumentException if {@code tx} is null, in auto-commit mode (the record would
   *     commit alone, before the effect) or aborted
   */
  public <X extends Exception> Outcome applyIfNewer(Connection tx, String entity, long seq, TxConsumer<X> effect)
      throws X {
    check(entity, seq, effect);
    Tx joined = idem.joined(tx, "sequence " + seq + " of " + stream + "/" + entity);
    return decided(entity, seq, claims.execute(joined, binds(entity, seq), Codec.none(), Claims.callback(effect), null));
  }

  /**
   * The engine's answer as an outcome, its event emitted (owned: after commit; joined: recorded, not
   * committed). In flight is thrown: a sequence's caller has no retry-after to schedule by, only an
   * event to leave unacknowledged.
   */
  private Outcome decided(String entity, long seq, Execution<Void> answer) {
    if (answer instanceof Execution.InFlight<Void> inFlight) {
      throw new InFlightException("sequence " + seq + " of " + stream + "/" + entity, inFlight.retryAfter());
    }
    Outcome outcome = answer.applied() ? Outcome.APPLIED : Outcome.ALREADY_DONE;
    events.sequence(stream, entity, seq, outcome);
    return outcome;
  }

  private Binds binds(String entity, long seq) {
    return new Binds(IdempotencyKey.of(stream, entity), null).seq(seq);
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

  private static void check(String entity, long seq, TxConsumer<?> effect) {
    IdempotencyKey.check("entity", entity);
    if (seq < 1) {
      throw new IllegalArgumentException("seq must be 1 or more, was " + seq);
    }
    Require.notNull(effect, "effect");
  }
}
