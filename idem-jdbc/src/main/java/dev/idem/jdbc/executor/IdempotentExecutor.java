package dev.idem.jdbc.executor;

import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.claim.Binds;
import dev.idem.jdbc.internal.claim.ClaimSettings;
import dev.idem.jdbc.internal.claim.ClaimTable;
import dev.idem.jdbc.internal.claim.Claims;
import dev.idem.jdbc.internal.claim.ExternalClaims;
import dev.idem.jdbc.internal.claim.RunningKeys;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Lineage;
import dev.idem.jdbc.internal.Pipelined;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.sql.Connection;
import java.time.Duration;
import java.util.Optional;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;

/**
 * Wraps an effect so that one intent key produces at most one committed effect, whatever is
 * repeated: retries, redeliveries, replays, several copies at once, from any number of processes.
 *
 * <pre>{@code
 * IdempotentExecutor payments = idem.executor().window(DedupeWindow.covering(RepeatSource.CLIENT_RETRY)).build();
 * Execution<String> e = payments.execute(key, Fingerprint.ofFields(request), Codec.utf8(),
 *     tx -> chargeAndRecord(tx.dsl(), request));   // runs once per key; repeats get the stored result
 * }</pre>
 *
 * <h2>Guarantees (per key: its scope and value)</h2>
 *
 * <ul>
 *   <li>At most one effect is committed, in either mode, with any number of concurrent copies.
 *   <li>A repeat with the same fingerprint after completion gets {@link Execution.Replayed}: the
 *       stored first result (through the {@link Codec}), when it completed and how long ago, by
 *       the database clock. The effect does not run.
 *   <li>A repeat while the first copy runs waits up to {@link Builder#inFlightWait} and then gets
 *       the replay, or runs itself if the first copy failed, or gets {@link Execution.InFlight}
 *       with a retry-after. A repeat that arrived within the window of the first copy's claim never
 *       runs the effect again, however long the first copy ran.
 *   <li>A repeat with another fingerprint gets {@link KeyReuseException}; nothing changes.
 *   <li>A local effect that throws is rolled back with its claim: the key is free again, and a
 *       retry runs it. A value the effect returns (a declined card) is a result: stored, replayed.
 *   <li>Keys are remembered for the {@link Builder#window}; a repeat after that runs again.
 * </ul>
 *
 * <p>Local effects ({@link #execute}) commit the claim, the effect and the result in one
 * transaction, the claim first. External effects ({@link #executeExternal}) run in three phases
 * around a call that no transaction can cover; see there. Keys, fingerprints and callbacks are
 * checked before anything is written: bad input is an {@link IllegalArgumentException} and changes
 * nothing.
 *
 * <p>Does not guarantee: anything the effect does outside the database transaction (in local mode
 * it runs once per <em>attempt</em>, and an attempt that rolls back may still have sent an email);
 * recognising repeats after the window; that two modes used on one key behave (do not mix them).
 *
 * <p>Thread-safe; build one per operation and share it. Details: docs/executor.md.
 */
public final class IdempotentExecutor {
  private final Context context;
  private final ClaimSettings settings;
  private final Duration lease;
  private final Events events;
  private final ClaimTable table;
  private final Claims claims;
  private final ExternalClaims external;

  private IdempotentExecutor(Builder b, ClaimSettings settings) {
    this.context = b.context;
    this.settings = settings;
    this.lease = b.lease;
    this.events = Events.to(context.listener(), settings.name());
    this.table = new ClaimTable(context, ClaimTable.Layout.KEYS, settings.window().length(), settings.inFlightWait(), lease);
    this.claims = new Claims(context, table, events, settings.window(), settings.retryAfter(), "idem executor");
    this.external = new ExternalClaims(claims, settings.inFlightWait());
  }

  static {
    Factories.register(IdempotentExecutor.class, Void.class, Builder.class, (context, none) -> new Builder(context));
  }

  // ---------------------------------------------------------------------------------------------
  // Local effects

  /**
   * Runs {@code effect} once for {@code key}: the claim, the effect and its stored result commit
   * together, or none of them does. It joins the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), under a savepoint;
   * with none open, it runs in a transaction of its own, and a serialization failure, deadlock or
   * out-of-memory refusal runs it again within the retry budget (your callback too: at most {@code
   * RetryBudget.maxRuns} runs in all).
   *
   * @param effect the work, on the transaction's connection ({@code tx.connection()}) or jOOQ
   *     context ({@code tx.dsl()}); its return value is the result stored with the key
   * @return {@link Execution.Applied} if the effect ran now, {@link Execution.Replayed} with the
   *     first result, or {@link Execution.InFlight} if another copy held the key for longer than
   *     {@link Builder#inFlightWait}
   * @throws KeyReuseException if the key was first used with another fingerprint
   * @throws CodecException if the result could not be encoded (the effect was rolled back) or a
   *     stored one decoded
   * @throws IllegalStateException if called from the effect of the same key on this thread
   * @throws X what the effect threw, after rolling it back with the claim
   */
  public <T, X extends Exception> Execution<T> execute(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect) throws X {
    checkArguments(key, fingerprint, codec, effect, "effect");
    return claims.execute(null, new Binds(key, fingerprint), codec, traced(key, effect), null);
  }

  /**
   * {@link #execute(IdempotencyKey, Fingerprint, Codec, TxCallback)} in the caller's open
   * transaction on {@code callerTx}: the claim and the stored result are written there and commit
   * or roll back with the caller's own work. The executor never commits or rolls back the caller's
   * transaction: it sets a savepoint before the claim, and rolls back to it when the effect throws,
   * the key is in flight or reused, so the key is free again and the transaction stays usable. An
   * {@link Execution.Applied} here means "recorded in your transaction".
   *
   * <p>Under REPEATABLE READ and SERIALIZABLE a copy that loses a race for the key cannot see the
   * winner's row in its snapshot; PostgreSQL raises SQLSTATE 40001, which is thrown (wrapped in a
   * {@link DataAccessException}) after rolling back to the savepoint, because only the caller can
   * retry its transaction.
   *
   * @param callerTx a connection with an open transaction (auto-commit off)
   * @throws IllegalArgumentException if {@code callerTx} is null, in auto-commit mode or aborted (a
   *     statement in it failed), before any SQL
   * @throws DataAccessException if the rollback to the savepoint failed (the connection broke):
   *     then the caller's transaction is not usable and must be rolled back
   */
  public <T, X extends Exception> Execution<T> execute(
      Connection callerTx, IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect)
      throws X {
    checkArguments(key, fingerprint, codec, effect, "effect");
    return claims.execute(context.joined(callerTx, "key " + key), new Binds(key, fingerprint), codec, traced(key, effect), null);
  }

  /**
   * Runs {@code statements} once for {@code key}: the effect given as jOOQ statements rather than a
   * callback, for an effect that is only writes and whose caller needs no result but "done". The
   * claim and the statements go to PostgreSQL as one string, in one round trip, the claim first: a
   * key that has a row (or gets one while the claim waits for another copy) stops the string at
   * the claim, before any statement runs, having written nothing. So a recognised repeat never runs
   * a statement, and a new key costs one round trip where a bare transaction of the same
   * statements costs two. Joins the transaction open on this thread, as the callback form does.
   *
   * <p>The statements run in order and the first that fails rolls back everything, the claim
   * included: the key is free again, and the failure is thrown as a {@link DataAccessException}.
   * Nothing is stored for replay; a repeat gets {@link Execution.Replayed} with a null value. What a
   * statement returns is discarded. A statement must not end or split the transaction ({@code
   * COMMIT}, {@code ROLLBACK}, {@code SAVEPOINT}).
   *
   * @param statements the effect: one or more statements, rendered and bound by idem's jOOQ
   *     configuration (their own {@code Configuration}, if attached, is not used)
   * @throws KeyReuseException if the key was first used with another fingerprint
   * @throws IllegalArgumentException if {@code statements} is null, empty or holds a null, or jOOQ
   *     cannot render or bind one of them (nothing is sent)
   * @throws DataAccessException what a statement (or the commit's deferred checks) failed with,
   *     after rolling it back with the claim
   */
  public Execution<Void> execute(IdempotencyKey key, Fingerprint fingerprint, Query... statements) {
    Require.notNull(key, "key");
    Require.notNull(fingerprint, "fingerprint");
    Query[] effect = Pipelined.checked(statements, "statements");
    return claims.execute(null, new Binds(key, fingerprint), Codec.none(), null, effect);
  }

  /**
   * {@link #execute(IdempotencyKey, Fingerprint, Query...)} in the caller's open transaction on
   * {@code callerTx}, under a savepoint: the savepoint, the claim, the statements and the release
   * of the savepoint go in one round trip.
   *
   * @throws IllegalArgumentException if {@code callerTx} is null, in auto-commit mode or aborted,
   *     or {@code statements} is null, empty or holds a null
   */
  public Execution<Void> execute(Connection callerTx, IdempotencyKey key, Fingerprint fingerprint, Query... statements) {
    Require.notNull(key, "key");
    Require.notNull(fingerprint, "fingerprint");
    Query[] effect = Pipelined.checked(statements, "statements");
    return claims.execute(context.joined(callerTx, "key " + key), new Binds(key, fingerprint), Codec.none(), null, effect);
  }

  // ---------------------------------------------------------------------------------------------
  // External effects

  /**
   * Runs an external effect (a card charge, an email) once for {@code key}, in three phases:
   *
   * <ol>
   *   <li>claim: the key's row is inserted in flight, with the fingerprint, the call key (the
   *       persisted intent), a fencing token and a lease of {@link Builder#lease} by the database
   *       clock, and committed at once. The token is not a fixed number (a new row's is one above
   *       the fence floor, which expiry raises to the highest token it deletes); what is
   *       guaranteed is that a key's tokens only grow, across takeovers, re-claims past the window
   *       and the deletion of its row, so a later attempt always holds a higher token;
   *   <li>call: {@code call} runs outside any transaction, given an {@link ExternalAttempt} with
   *       the token and the call key ({@code Keys.child(key, "external")}, the same for every
   *       attempt: send it to the provider so the provider dedupes);
   *   <li>record: the result is stored and the key completed, only if the row still carries this
   *       attempt's token. A record that fails (the connection died after the provider answered)
   *       is tried again on a fresh connection within the retry budget; if it fails for good, it
   *       is thrown, and made in the background (one daemon thread, a back-off capped at 200 ms)
   *       as soon as the database answers again, at most until the lease would have ended; a
   *       record the database refuses ends the lease instead, so a retry takes over at once
   *       (ask the provider with a {@link Resolver} rather than call again).
   * </ol>
   *
   * <p>A copy that finds a live lease polls (re-reading the row) up to {@link
   * Builder#inFlightWait}, then gets {@link Execution.InFlight} with the lease's remaining time as
   * retry-after. A copy that finds the lease ended takes the claim over with a higher token (the
   * row's + 1) and calls again (takeover = true). A holder whose token is no longer the highest when it records gets
   * {@link StaleFenceException}, and nothing it did is stored. A copy whose claim keeps failing
   * with serialization failures (a SERIALIZABLE pool, many copies at once) is answered {@link
   * Execution.InFlight}, never the failure.
   *
   * <p>When {@code call} throws, the exception is rethrown and the attempt's lease is ended at
   * once (the row stays in flight: the call may or may not have reached the provider). A value
   * the call returns (a decline) is a result: stored and replayed.
   *
   * <p>Never joins a transaction: phase 1 must commit before the call goes out.
   *
   * @throws KeyReuseException if the key was first used with another fingerprint
   * @throws StaleFenceException if this attempt's lease ended and another attempt took over
   * @throws CodecException if the result could not be encoded (the lease is ended, as for a throw)
   * @throws IllegalStateException if called from a local effect of the same key on this thread
   * @throws X what the call threw
   */
  public <T, X extends Exception> Execution<T> executeExternal(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call) throws X {
    checkArguments(key, fingerprint, codec, call, "call");
    return this.<T, X, RuntimeException>external(key, fingerprint, codec, call, null);
  }

  /**
   * {@link #executeExternal(IdempotencyKey, Fingerprint, Codec, ExternalCall)}, but a takeover
   * first asks {@code resolver} whether the earlier attempt reached the provider: a result it
   * returns is recorded (fenced, as a call's would be) and answered as {@link Execution.Applied},
   * without calling again; empty means "no record of it" and the call is made.
   *
   * @throws Y what the resolver threw (the lease is ended, as for a call that throws)
   */
  public <T, X extends Exception, Y extends Exception> Execution<T> executeExternal(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call, Resolver<T, Y> resolver)
      throws X, Y {
    checkArguments(key, fingerprint, codec, call, "call");
    Require.notNull(resolver, "resolver");
    return external(key, fingerprint, codec, call, resolver);
  }

  /** Phase 1 (the engine's), then phases 2 and 3 for a claim held, or the answer from the row. */
  private <T, X extends Exception, Y extends Exception> Execution<T> external(IdempotencyKey key,
      Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call, Resolver<T, Y> resolver) throws X, Y {
    RunningKeys.refuseNested(context, ClaimTable.Layout.KEYS, key);
    Binds binds = new Binds(key, fingerprint);
    IdempotencyKey callKey = Keys.child(key, "external");
    binds.callKey = callKey.value();
    ExternalClaims.Claim claim = external.claim(binds);
    if (claim instanceof ExternalClaims.Completed completed) {
      return claims.reported(key, claims.replay(key, codec, completed.row()));
    }
    if (claim instanceof ExternalClaims.InFlight inFlight) {
      return new Execution.InFlight<>(key.toString(), inFlight.retryAfter());
    }
    ExternalClaims.Held held = (ExternalClaims.Held) claim;
    // Only a takeover asks the resolver: the attempt taken over may have reached the provider.
    return callOut(new ExternalAttemptValue(key, callKey, new FencingToken(held.fence()), held.takeover()), codec, call,
        held.takeover() ? resolver : null, binds);
  }

  /** Phases 2 and 3 for one attempt that holds the claim. */
  private <T, X extends Exception, Y extends Exception> Execution<T> callOut(ExternalAttempt attempt, Codec<T> codec,
      ExternalCall<T, X> call, Resolver<T, Y> resolver, Binds binds) throws X, Y {
    long token = attempt.token().value();
    T value;
    byte[] bytes;
    try {
      Optional<T> known = resolver == null ? Optional.empty() : resolver.lookUp(attempt);
      if (known == null) {
        throw new IllegalStateException("resolver returned null for " + attempt.key() + "; return Optional.empty()"
            + " when the provider has no record of the call");
      }
      // the call runs with the key as this thread's intent, as a local effect does: a message a
      // transaction inside it enqueues carries the key
      value = known.isPresent() ? known.get() : Lineage.run(context, attempt.key(), unused -> call.call(attempt), null);
      bytes = codec.storesNothing() ? null
          : Claims.encode(attempt.key(), codec, value, "the call's lease was ended so that a repeat takes over");
    } catch (Throwable t) {
      external.endLease(binds, token, t);
      throw t;
    }
    // The call happened: a record that fails for good is made in the background once the database
    // answers (or the lease is ended), so the key does not wait out its lease in flight.
    Long recorded = external.record(binds.result(bytes), token);
    if (recorded == null) {
      StaleFenceException stale = new StaleFenceException("key " + attempt.key(), token, external.highestFence(binds));
      events.staleFence(stale.resource(), stale.token(), stale.highest());
      throw stale;
    }
    events.applied(attempt.key());
    return new Execution.Applied<>(value);
  }

  /**
   * A completer of this executor's unknown outcomes in {@code scopes}: the keys whose call never
   * recorded its result (in flight, lease over), looked up with {@code resolver} and completed
   * with what it finds (encoded by {@code codec}, the codec this executor's calls of those keys
   * use), or released when the provider has no record of the call. Runs one instance at a time
   * per executor {@link Builder#name name}; see {@link OutcomeCompleter}.
   *
   * @param scopes the scopes of the keys this executor's calls with this resolver use, one or more
   * @throws IllegalArgumentException if {@code codec} or {@code resolver} is null, or {@code
   *     scopes} is empty or holds a scope that is not a valid one
   */
  public <T, Y extends Exception> OutcomeCompleter completer(Codec<T> codec, Resolver<T, Y> resolver, String... scopes) {
    return OutcomeCompleter.of(context, external, lease, settings.name(), codec, resolver, scopes);
  }

  // ---------------------------------------------------------------------------------------------
  // Expiry

  /**
   * Deletes keys past their window (by the database clock), at most {@link Builder#expiryBatches
   * batch size} per transaction and at most that many batches per call, so expiry never runs one
   * long DELETE. A repeat of a deleted key is no longer recognised and runs again; a key past its
   * window is treated as gone even before it is deleted.
   *
   * <p>Keys of external effects are deleted once completed and past their window (so past their
   * lease too); one still in flight is an unknown outcome and stays for the operator ({@link
   * dev.idem.jdbc.ops.Operations}). Their fencing tokens never restart: each batch raises the fence
   * floor to the highest token it deleted before it commits, and a key claimed again after its row
   * was deleted starts above that floor, so a stalled holder of the deleted row is refused.
   *
   * @return how many keys were deleted; call again while it returns the maximum
   */
  public long expire() {
    return claims.expire(table.completed(), settings.expiryBatchSize(), settings.expiryMaxBatches());
  }

  /** The window keys of this executor are remembered for. */
  public DedupeWindow window() {
    return settings.window();
  }

  /**
   * {@code effect} run with {@code key} as this thread's intent: an outbox message it enqueues
   * carries the key (its {@code idem-intent} header), so the next hop knows which intent produced it.
   */
  private <T, X extends Exception> TxCallback<T, X> traced(IdempotencyKey key, TxCallback<T, X> effect) {
    return tx -> Lineage.run(context, key, effect, tx);
  }

  private static void checkArguments(IdempotencyKey key, Fingerprint fingerprint, Codec<?> codec, Object work, String workName) {
    Require.notNull(key, "key");
    Require.notNull(fingerprint, "fingerprint");
    Require.notNull(codec, "codec");
    Require.notNull(work, workName);
  }

  /**
   * Configures an {@link IdempotentExecutor}. Validates and copies in {@link #build()}; the executor
   * is immutable.
   */
  public static final class Builder {
    private final Context context;
    private final ClaimSettings.Builder settings = ClaimSettings.builder("executor", DedupeWindow.covering(RepeatSource.CLIENT_RETRY));
    private Duration lease = Duration.ofSeconds(30);

    private Builder(Context context) {
      this.context = Require.notNull(context, "context");
    }

    /**
     * How long a key is remembered after it is claimed, by the database clock; default {@link
     * RepeatSource#CLIENT_RETRY} (24 h). Size it by the slowest path a repeat can take; at most 100
     * years.
     */
    public Builder window(DedupeWindow window) {
      settings.window(window);
      return this;
    }

    /**
     * How long a repeat waits for the first copy before it is answered {@link Execution.InFlight};
     * default 2 s. A local effect's repeat blocks on the key's unique index (PostgreSQL {@code
     * lock_timeout}, set for the claim only, with {@code statement_timeout} off for it, both
     * restored after it) and wakes the moment the first copy commits or rolls back. An external
     * effect's repeat polls the row. {@code Duration.ZERO} answers at once (the claim still waits
     * 1 ms, PostgreSQL's smallest lock timeout). The wait holds a connection. At most 2^31 - 1 ms.
     */
    public Builder inFlightWait(Duration wait) {
      settings.inFlightWait(wait);
      return this;
    }

    /**
     * How long an external effect's claim is held, by the database clock, before another copy may
     * take it over; default 30 s. Longer than the call takes, including its timeouts; at most
     * 100 years.
     */
    public Builder lease(Duration lease) {
      this.lease = lease;
      return this;
    }

    /**
     * The retry-after told to a repeat that found the first copy still running after {@link
     * #inFlightWait}; default 1 s. (External effects answer the lease's time left.)
     */
    public Builder retryAfter(Duration retryAfter) {
      settings.retryAfter(retryAfter);
      return this;
    }

    /** The source name events carry, e.g. {@code "executor:payments"}; default {@code "executor"}. */
    public Builder name(String name) {
      settings.name(name);
      return this;
    }

    /**
     * How many expired keys {@link IdempotentExecutor#expire()} deletes per transaction (default
     * 1000) and at most how many such batches one call runs (default 100).
     */
    public Builder expiryBatches(int batchSize, int maxBatches) {
      settings.expiryBatches(batchSize, maxBatches);
      return this;
    }

    /** @throws IllegalArgumentException naming the setting that is missing or out of range */
    public IdempotentExecutor build() {
      ClaimSettings checked = settings.build();
      DbTime.bounded(Require.positive(lease, "lease"), "lease");
      return new IdempotentExecutor(this, checked);
    }
  }
}
