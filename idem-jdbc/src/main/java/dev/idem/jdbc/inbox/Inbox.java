package dev.idem.jdbc.inbox;

import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.claim.BatchClaims;
import dev.idem.jdbc.internal.claim.Binds;
import dev.idem.jdbc.internal.claim.ClaimSettings;
import dev.idem.jdbc.internal.claim.ClaimTable;
import dev.idem.jdbc.internal.claim.Claims;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.InboxAttempts;
import dev.idem.jdbc.internal.Lineage;
import dev.idem.jdbc.internal.Pipelined;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.jdbc.tx.TxConsumer;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.exception.DataAccessException;

/**
 * The idempotent consumer: each message id is applied once per consumer. {@link #receive} claims
 * {@code (consumer, message id)} first, in the same transaction as the consumer's effect, so the
 * claim and the effect commit together or not at all. It runs on the same claim engine as the
 * executor's local effects, so it answers the same way.
 *
 * <pre>{@code
 * Inbox billing = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).build();
 * Execution<Void> e = billing.receive(message.id(), tx -> charge(tx, message));
 * if (!e.inFlight()) ack(message); // applied now, or a copy (replayed): both mean done
 * }</pre>
 *
 * <p>Guarantees, observable as rows: for a message id received any number of times, by any number
 * of threads or processes at once, within the window, the effect's writes are committed exactly
 * once. A copy returns {@link Execution.Replayed} (never an error) and does not run the effect. A
 * copy that arrives while the first runs waits for it up to {@link Builder#inFlightWait}, then is
 * answered from its outcome, or gets {@link Execution.InFlight}: do not acknowledge it; the broker
 * redelivers it later. An effect that throws rolls back the claim too, so a redelivery runs it
 * again. {@link #receiveAll} gives the same guarantees per message to a polled batch, in one
 * transaction whose claims are one statement.
 *
 * <p>Does not guarantee: anything outside the transaction. An effect that calls a remote service
 * may call it again when its transaction rolls back (or the process dies before commit). A copy
 * arriving after the {@link DedupeWindow} runs again: size the window beyond the broker's longest
 * redelivery (its retention, plus any replay you may do).
 *
 * <p>Thread-safe; immutable.
 */
public final class Inbox {
  private final Context context;
  private final String consumer;
  private final ClaimSettings settings;
  private final Claims claims;
  /** Writes the intent a message carried on its id's row, claimed in the same transaction. */
  private final String recordIntent;

  private Inbox(Builder b, ClaimSettings settings) {
    this.context = b.context;
    this.consumer = b.consumer;
    this.settings = settings;
    ClaimTable table = new ClaimTable(context, ClaimTable.Layout.INBOX, settings.window().length(), settings.inFlightWait(), null);
    this.claims = new Claims(context, table, Events.to(context.listener(), settings.name()), settings.window(),
        settings.retryAfter(), "inbox " + consumer);
    DSLContext d = context.dsl();
    Table<?> inbox = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_inbox"));
    this.recordIntent = d.render(d.update(inbox).set(DSL.field(DSL.name("intent"), String.class), DSL.val((String) null))
        .where(DSL.field(DSL.name("consumer"), String.class).eq(DSL.val((String) null)))
        .and(DSL.field(DSL.name("message_id"), String.class).eq(DSL.val((String) null))));
  }

  static {
    Factories.register(Inbox.class, String.class, Builder.class, Builder::new);
    // KafkaInbox keeps its attempts next to this inbox and reads its ids: it needs the context and name.
    InboxAttempts.register(o -> {
      Inbox inbox = (Inbox) o;
      return new InboxAttempts.Source(inbox.context, inbox.consumer);
    });
  }

  /** How long a message id is remembered. */
  DedupeWindow window() {
    return settings.window();
  }

  /**
   * Applies {@code effect} for {@code messageId} unless this consumer already did, in one
   * transaction with the claim. Joins the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), under a savepoint;
   * else runs in a transaction of its own, run again within the retry budget on a serialization
   * failure.
   *
   * @return {@link Execution.Applied} if the effect ran and committed (or was recorded in the open
   *     transaction), {@link Execution.Replayed} if the message was received before (the effect did
   *     not run; the time is when it was first received), {@link Execution.InFlight} if another
   *     copy held it longer than {@link Builder#inFlightWait}
   * @throws X what the effect threw, after rolling the claim back with it
   * @throws IllegalArgumentException if {@code messageId} is not a valid id or {@code effect} is null
   * @throws IllegalStateException if called from the effect of the same message on this thread
   */
  public <X extends Exception> Execution<Void> receive(String messageId, TxConsumer<X> effect) throws X {
    Require.notNull(effect, "effect");
    return claims.execute(null, binds(messageId), Codec.none(), Claims.callback(effect), null);
  }

  /**
   * {@link #receive(String, TxConsumer)} for a message that carries the key of the intent that
   * produced it (its {@value NewMessage#INTENT_HEADER} header): the inbox records it with the id,
   * in the claim's transaction, so that {@link dev.idem.jdbc.reconcile.IntentLineage} finds two ids
   * received for one intent; and the effect runs with it as this thread's intent, so a message it
   * enqueues carries it on to the next hop. Costs one statement more, in the claim's transaction.
   *
   * @param intent the intent key as the message carries it ({@code "scope:value"}), or null when it
   *     carries none (then this is {@link #receive(String, TxConsumer)}, and a message the effect
   *     enqueues carries no intent either)
   * @throws IllegalArgumentException also if {@code intent} is empty, longer than 511 characters or
   *     not visible ASCII; nothing is written
   */
  public <X extends Exception> Execution<Void> receive(String messageId, String intent, TxConsumer<X> effect) throws X {
    Require.notNull(effect, "effect");
    Binds binds = binds(messageId);
    return claims.execute(null, binds, Codec.none(), traced(binds, Lineage.check("intent", intent), effect), null);
  }

  /**
   * {@link #receive(String, String, TxConsumer)} inside the caller's transaction on {@code callerTx},
   * as {@link #receive(Connection, String, TxConsumer)}.
   */
  public <X extends Exception> Execution<Void> receive(Connection callerTx, String messageId, String intent,
      TxConsumer<X> effect) throws X {
    Require.notNull(effect, "effect");
    Binds binds = binds(messageId);
    TxCallback<Void, X> traced = traced(binds, Lineage.check("intent", intent), effect);
    return claims.execute(context.joined(callerTx, "message " + messageId), binds, Codec.none(), traced, null);
  }

  /**
   * The effect, run with {@code intent} as this thread's intent, after recording it on the id's
   * row (just claimed in this transaction, so no other transaction waits on it).
   */
  private <X extends Exception> TxCallback<Void, X> traced(Binds binds, String intent, TxConsumer<X> effect) {
    TxCallback<Void, X> callback = Claims.callback(effect);
    return tx -> {
      if (intent != null) {
        recordIntent(tx, binds.key().value(), intent);
      }
      return Lineage.run(context, intent, callback, tx);
    };
  }

  private void recordIntent(Tx tx, String messageId, String intent) {
    try (PreparedStatement ps = tx.connection().prepareStatement(recordIntent)) {
      ps.setString(1, intent);
      ps.setString(2, consumer);
      ps.setString(3, messageId);
      ps.executeUpdate();
    } catch (SQLException e) {
      throw new DataAccessException("inbox " + consumer + ": could not record the intent of message " + messageId + ": "
          + e.getMessage(), e);
    }
  }

  /**
   * {@link #receive(String, TxConsumer)} inside the caller's transaction on {@code callerTx}, which
   * stays open: the caller commits (the claim and the effect with their own work) or rolls back.
   * The claim and effect run under a savepoint, so an effect that throws frees the id and undoes
   * its own writes without aborting the caller's transaction. {@link Execution.Applied} here means
   * "applied in your transaction".
   *
   * @throws IllegalArgumentException also if {@code callerTx} is null, in auto-commit mode or aborted
   */
  public <X extends Exception> Execution<Void> receive(Connection callerTx, String messageId, TxConsumer<X> effect) throws X {
    Require.notNull(effect, "effect");
    Binds binds = binds(messageId);
    return claims.execute(context.joined(callerTx, "message " + messageId), binds, Codec.none(), Claims.callback(effect), null);
  }

  /**
   * Applies {@code statements} for {@code messageId} unless this consumer already did: the effect
   * given as jOOQ statements rather than a callback, for a consumer whose effect is only writes.
   * The claim of the id and the statements go to PostgreSQL as one string, in one round trip, the
   * claim first: an id that has a row stops the string at the claim, before any statement runs,
   * having written nothing. Joins the transaction open on this thread, as the callback form does.
   *
   * <pre>{@code
   * billing.receive(message.id(), dsl.insertInto(CHARGE).set(CHARGE.ORDER_ID, order).set(CHARGE.AMOUNT, amount));
   * }</pre>
   *
   * <p>The statements run in order; the first that fails rolls back everything, the claim included,
   * and its failure is thrown, so a redelivery runs them again. What a statement returns is
   * discarded. A statement must not end or split the transaction ({@code COMMIT}, {@code
   * ROLLBACK}, {@code SAVEPOINT}).
   *
   * @param statements the effect, rendered and bound by idem's jOOQ configuration
   * @throws IllegalArgumentException if {@code messageId} is not a valid id, or {@code statements}
   *     is null, empty or holds a null, or jOOQ cannot render or bind one of them (nothing is sent)
   * @throws DataAccessException what a statement (or the commit's deferred checks) failed with,
   *     after rolling it back with the claim
   */
  public Execution<Void> receive(String messageId, Query... statements) {
    Binds binds = binds(messageId);
    return claims.execute(null, binds, Codec.none(), null, Pipelined.checked(statements, "statements"));
  }

  /**
   * {@link #receive(String, Query...)} inside the caller's transaction on {@code callerTx}, under a
   * savepoint: the savepoint, the claim, the statements and the release go in one round trip.
   *
   * @throws IllegalArgumentException also if {@code callerTx} is null, in auto-commit mode or aborted
   */
  public Execution<Void> receive(Connection callerTx, String messageId, Query... statements) {
    Binds binds = binds(messageId);
    Query[] effect = Pipelined.checked(statements, "statements");
    return claims.execute(context.joined(callerTx, "message " + messageId), binds, Codec.none(), null, effect);
  }

  /**
   * Applies the effect of each message of a batch (a consumer's poll) unless this consumer already
   * did, all in one transaction: the ids of the whole batch are claimed in one statement (one round
   * trip), then each new message's effect runs, in the order of the list. The same guarantees as
   * {@link #receive(String, TxConsumer)}, per message: its effect commits once per id within the
   * window, a copy's effect does not run, and an effect that throws rolls back its own writes and
   * frees its id (its claim is gone when the batch commits), so a redelivery runs it again, while
   * the other messages' effects commit. To spare a round trip per message, effects run with no
   * savepoint each until one throws; then the batch's writes so far are rolled back and the batch
   * runs again without that message, each effect under a savepoint of its own: so an effect before
   * a failed one runs twice in the call, its first run's writes rolled back (nothing outside the
   * transaction is undone, as always).
   *
   * <pre>{@code
   * Received<Record> r = billing.receiveAll(polled, Record::id, (tx, m) -> charge(tx, m));
   * ack(r.applied()); ack(r.duplicates()); // done; r.failed() and r.inFlight() are redelivered
   * }</pre>
   *
   * <p>An id repeated inside the batch applies once: its later occurrences share the first's fate
   * (a duplicate once the first applied or was received before; failed or in flight with it). A
   * message another copy of which is held uncommitted elsewhere is waited for (the claim of the
   * batch waits at most {@link Builder#inFlightWait} for each such copy, and after one wait ran
   * out the ids left are claimed answering at once; a batch run again after a failed effect may
   * wait once more); still held, it is reported in flight, nothing of it written. An id past its window is claimed again, as {@code receive} does. Joins the
   * transaction open on this thread, under a savepoint (the batch commits or rolls back with it,
   * and a failure of the batch itself undoes only the batch); else runs in a transaction of its
   * own, run again within the retry budget on a serialization failure (the effects with it).
   * Events are reported once per distinct id, as {@code receive} reports them: applied, replayed
   * (with the age of the first receipt), in flight.
   *
   * <p>Does not guarantee: the order of effects beyond the batch's own (they run in the order of
   * the list), or anything outside the transaction, as {@code receive}.
   *
   * @param messages the batch; an empty list does nothing (no round trip)
   * @param messageId the id of a message, as the producer minted it (an outbox message's id, carried
   *     as a header), never the broker's offset: a republished message gets a new offset
   * @param effect what a new message does, with the batch's transaction
   * @return each message in one of the outcome's lists, in the order of {@code messages}
   * @throws IllegalArgumentException if an argument is null, or a message is null or its id invalid
   *     (naming its position); nothing is written
   * @throws IllegalStateException if called from the effect of one of the batch's ids on this thread
   */
  public <M> Received<M> receiveAll(List<M> messages, Function<? super M, String> messageId, BatchEffect<? super M> effect) {
    return receiveAll(messages, messageId, null, effect);
  }

  /**
   * {@link #receiveAll(List, Function, BatchEffect)} for messages that carry the key of the intent
   * that produced them, as {@link #receive(String, String, TxConsumer)} records it: each new
   * message's intent is written on its id's row before its effect runs (one statement more per
   * message that carries one), and its effect runs with it as this thread's intent.
   *
   * @param intent the intent each message carries, or null for one that carries none; null (the
   *     function) is {@link #receiveAll(List, Function, BatchEffect)}
   * @throws IllegalArgumentException also if a message's intent is empty, longer than 511
   *     characters or not visible ASCII (naming its position); nothing is written
   */
  public <M> Received<M> receiveAll(List<M> messages, Function<? super M, String> messageId,
      Function<? super M, String> intent, BatchEffect<? super M> effect) {
    Require.notNull(messages, "messages");
    Require.notNull(messageId, "messageId");
    Require.notNull(effect, "effect");
    List<M> batch = new ArrayList<>(messages); // one snapshot of the list, checked and run
    if (batch.isEmpty()) {
      return new ReceivedValue<>(List.of(), List.of(), List.of(), List.of());
    }
    // The distinct ids, in order of first occurrence; slot[i] is message i's id among them, and
    // first.get(k) the message where id k first occurs (the one whose effect runs).
    Map<String, Integer> distinct = new LinkedHashMap<>();
    int[] slot = new int[batch.size()];
    List<Integer> first = new ArrayList<>();
    List<IdempotencyKey> ids = new ArrayList<>();
    for (int i = 0; i < batch.size(); i++) {
      M message = batch.get(i);
      if (message == null) {
        throw new IllegalArgumentException("messages[" + i + "] must not be null (nothing was received)");
      }
      IdempotencyKey id = key(i, messageId.apply(message));
      Integer seen = distinct.putIfAbsent(id.value(), distinct.size());
      if (seen == null) {
        first.add(i);
        ids.add(id);
      }
      slot[i] = seen == null ? first.size() - 1 : seen;
    }
    String[] keys = distinct.keySet().toArray(new String[0]);
    String[] intents = new String[keys.length];
    if (intent != null) {
      for (int k = 0; k < keys.length; k++) {
        intents[k] = Lineage.check("intent of messages[" + first.get(k) + "]", intent.apply(batch.get(first.get(k))));
      }
    }
    BatchClaims.Outcome[] outcomes = claims.batches().execute(consumer, keys, ids.toArray(new IdempotencyKey[0]), (tx, k) -> {
      if (intents[k] != null) {
        recordIntent(tx, keys[k], intents[k]);
      }
      Lineage.run(context, intents[k], t -> {
        effect.apply(t, batch.get(first.get(k)));
        return null;
      }, tx);
    });
    List<M> applied = new ArrayList<>();
    List<M> duplicates = new ArrayList<>();
    List<Received.Failure<M>> failed = new ArrayList<>();
    List<M> inFlight = new ArrayList<>();
    for (int i = 0; i < slot.length; i++) {
      M message = batch.get(i);
      BatchClaims.Outcome o = outcomes[slot[i]];
      boolean repeat = first.get(slot[i]) != i;
      switch (o.fate()) {
        case APPLIED -> (repeat ? duplicates : applied).add(message);
        case REPEAT -> duplicates.add(message);
        case FAILED -> failed.add(new ReceivedValue.FailureValue<>(message, o.error()));
        case IN_FLIGHT -> inFlight.add(message);
      }
    }
    return new ReceivedValue<>(applied, duplicates, failed, inFlight);
  }

  /**
   * Deletes this consumer's message ids past their window (by the database clock), in bounded
   * batches (each its own short transaction). A copy of a deleted id would run again.
   *
   * @return the number of ids deleted (at most {@link Builder#expiryBatches batch size × batches}
   *     per call; call again while it returns that)
   */
  public long expire() {
    return claims.expire(claims.table().ofScope(consumer), settings.expiryBatchSize(), settings.expiryMaxBatches());
  }

  /**
   * The key of {@code messageId}, the id of {@code messages[i]}: checked once (as the key is made),
   * with no message naming the position built unless it is invalid.
   */
  private IdempotencyKey key(int i, String messageId) {
    try {
      return IdempotencyKey.of(consumer, messageId);
    } catch (IllegalArgumentException e) {
      IdempotencyKey.check("message id of messages[" + i + "]", messageId); // the consumer is valid: this throws
      throw e;
    }
  }

  private Binds binds(String messageId) {
    IdempotencyKey.check("message id", messageId);
    return new Binds(IdempotencyKey.of(consumer, messageId), null);
  }

  /** Configures an {@link Inbox}; validated and copied in {@link #build()}. */
  public static final class Builder {
    private final Context context;
    private final String consumer;
    private final ClaimSettings.Builder settings;

    private Builder(Context context, String consumer) {
      this.context = Require.notNull(context, "context");
      this.consumer = consumer;
      this.settings = ClaimSettings.builder("inbox:" + consumer, DedupeWindow.covering(RepeatSource.KAFKA_REPLAY));
    }

    /**
     * How long a message id is remembered, by the database clock; default {@link
     * RepeatSource#KAFKA_REPLAY} (7 days, a topic's default retention); at most 100 years. Make it
     * longer than the longest time a copy can arrive after the first: the broker's retention and
     * redelivery, plus any replay.
     */
    public Builder window(DedupeWindow window) {
      settings.window(window);
      return this;
    }

    /**
     * How long a copy waits for the first copy still running before it is answered {@link
     * Execution.InFlight}; default 2 s. It blocks on the id's unique index and wakes the moment the
     * first copy commits or rolls back. The wait holds a connection.
     */
    public Builder inFlightWait(Duration wait) {
      settings.inFlightWait(wait);
      return this;
    }

    /** The retry-after told to a copy answered {@link Execution.InFlight}; default 1 s. */
    public Builder retryAfter(Duration retryAfter) {
      settings.retryAfter(retryAfter);
      return this;
    }

    /**
     * How many expired ids {@link Inbox#expire()} deletes per transaction (default 1000) and at most
     * how many such batches one call runs (default 100).
     */
    public Builder expiryBatches(int batchSize, int maxBatches) {
      settings.expiryBatches(batchSize, maxBatches);
      return this;
    }

    /** @throws IllegalArgumentException naming the setting that is invalid: the consumer name, the window, ... */
    public Inbox build() {
      IdempotencyKey.check("consumer", consumer);
      return new Inbox(this, settings.build());
    }
  }
}
