package dev.idem.jdbc.executor;

import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.internal.Events;
import dev.idem.internal.Require;
import dev.idem.jdbc.ClaimOrder;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Tx;
import dev.idem.jdbc.TxCallback;
import dev.idem.jdbc.internal.AtCommit;
import dev.idem.jdbc.internal.AutoCommit;
import dev.idem.jdbc.internal.ClaimRaced;
import dev.idem.jdbc.internal.ClaimTaken;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.internal.Expiry;
import dev.idem.jdbc.internal.Pipelined;
import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.jdbc.internal.SqlStates;
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
import java.sql.SQLException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;

/**
 * Wraps an effect so that one intent key produces at most one committed effect, whatever is
 * repeated: retries, redeliveries, replays, several copies at once.
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
 *       the database clock. The effect does not run (with {@link ClaimOrder#AT_COMMIT}, a repeat
 *       this executor has not handled lately runs it first and is rolled back: nothing of it commits).
 *   <li>A repeat while the first copy runs waits up to {@link Builder#inFlightWait} and then gets
 *       the replay, or runs itself if the first copy failed, or gets {@link Execution.InFlight}
 *       with a retry-after.
 *   <li>A repeat with another fingerprint gets {@link KeyReuseException}; nothing changes (with
 *       {@link ClaimOrder#AT_COMMIT} its callback may have run, and was rolled back).
 *   <li>A local effect that throws is rolled back with its claim: the key is free again, and a
 *       retry runs it. A value the effect returns (a declined card) is a result: stored, replayed.
 *   <li>Keys are remembered for the {@link Builder#window}; a repeat after that runs again.
 * </ul>
 *
 * <p>Local effects ({@link #execute}) commit the claim, the effect and the result in one
 * transaction; the claim comes before the effect, or with the commit ({@link
 * Builder#claimOrder}). External effects ({@link #executeExternal}) run in three phases around a call that
 * no transaction can cover; see there. Keys, fingerprints and callbacks are checked before
 * anything is written: bad input is an {@link IllegalArgumentException} and changes nothing.
 *
 * <p>Does not guarantee: anything the effect does outside the database transaction (in local mode
 * it runs once per <em>attempt</em>, and an attempt that rolls back may still have sent an email;
 * with {@link ClaimOrder#AT_COMMIT} a repeat not recognised beforehand is such an attempt);
 * recognising repeats after the window; that two modes used on one key behave (do not mix them).
 *
 * <p>Thread-safe; build one per operation and share it. Details: docs/executor.md.
 */
public final class IdempotentExecutor {
  private static final int MAX_CLAIM_ROUNDS = 10;
  private static final Duration FIRST_POLL = Duration.ofMillis(20);
  /** The longest wait PostgreSQL's lock_timeout (an int of milliseconds) can bound. */
  private static final Duration LONGEST_LOCK_WAIT = Duration.ofMillis(Integer.MAX_VALUE);
  private static final Duration LONGEST_POLL = Duration.ofMillis(250);

  private final Idem idem;
  private final DedupeWindow window;
  private final Duration inFlightWait;
  private final Duration lease;
  private final Duration retryAfter;
  private final ClaimOrder claimOrder;
  private final int expiryBatchSize;
  private final int expiryMaxBatches;
  private final Events events;
  private final KeyTable table;
  private final RecentKeys recent = new RecentKeys();

  private IdempotentExecutor(Builder b) {
    this.idem = b.idem;
    this.window = b.window;
    this.inFlightWait = b.inFlightWait;
    this.lease = b.lease;
    this.retryAfter = b.retryAfter;
    this.claimOrder = b.claimOrder;
    this.expiryBatchSize = b.expiryBatchSize;
    this.expiryMaxBatches = b.expiryMaxBatches;
    this.events = Events.to(idem.listener(), b.name);
    this.table = new KeyTable(idem, window.length(), lease, inFlightWait);
  }

  /** Starts the configuration of an executor on {@code idem}; see {@link Idem#executor()}. */
  public static Builder builder(Idem idem) {
    return new Builder(idem);
  }

  // ---------------------------------------------------------------------------------------------
  // Local effects

  /**
   * Runs {@code effect} once for {@code key}, in a transaction of its own on a connection from
   * idem's {@code DataSource}: the claim, the effect and its stored result commit together, or
   * none of them does. Called inside {@link Idem#inTransaction} on this thread, it joins that
   * transaction instead, as {@link #execute(Connection, IdempotencyKey, Fingerprint, Codec,
   * TxCallback)} does.
   *
   * <p>A serialization failure or deadlock (SQLSTATE 40001/40P01, e.g. two copies racing under
   * REPEATABLE READ or SERIALIZABLE) rolls back and runs the call again from the claim: when the
   * claim itself failed so (it waited for another copy's row, which committed; the effect had not
   * run), up to 10 times in all, not counted against {@link Idem.Builder#serializationRetries};
   * when it came later (the effect ran), up to that many times in a row (a lost claim in between
   * starts the count again). A copy that lost the race then
   * sees the winner's row and gets the replay.
   *
   * @param effect the work, on the transaction's connection ({@link Tx#connection()}) or jOOQ
   *     context ({@link Tx#dsl()}); its return value is the result stored with the key
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
    RunningKeys.refuseNested(idem, key);
    Tx open = idem.currentTransaction();
    if (open != null) {
      return joined(open.connection(), open.dsl(), key, fingerprint, codec, effect, null);
    }
    return owned(key, fingerprint, codec, effect, null);
  }

  /**
   * Runs {@code statements} once for {@code key}, in a transaction of its own on a connection from
   * the pool: the effect given as jOOQ statements rather than a callback, for an effect that is
   * only writes (insert the payment row, debit the balance) and whose caller needs no result but
   * "done". The claim, the statements and {@code COMMIT} go to PostgreSQL as one string, in one
   * round trip, the claim first: a key that has a row (or gets one while the claim waits for
   * another copy) fails the claim with a unique violation, PostgreSQL skips the statements, and the
   * call is answered as {@link #execute(IdempotencyKey, Fingerprint, Codec, TxCallback)} answers a
   * repeat, with the claim in a round trip of its own. So a recognised repeat never runs a
   * statement, as with a callback, and a new key costs one round trip where a bare transaction of
   * the same statements costs two. Called inside {@link Idem#inTransaction} on this thread, it
   * joins that transaction, as {@link #execute(Connection, IdempotencyKey, Fingerprint, Query...)}
   * does.
   *
   * <p>The statements run in order and the first that fails rolls back everything, the claim
   * included: the key is free again, and the failure is thrown as a {@link DataAccessException}
   * wrapping the driver's error. Nothing is stored for replay; a repeat gets {@link
   * Execution.Replayed} with a null value. A serialization
   * failure or deadlock makes the call again with the claim in a round trip of its own, which
   * retries as {@link #execute(IdempotencyKey, Fingerprint, Codec, TxCallback)} does (one run more
   * than {@link Idem.Builder#serializationRetries} allows a callback), so the statements may be
   * sent more than once, never committed more than once. What a statement returns (rows of a
   * SELECT or a RETURNING) is discarded. A statement must not end or split the transaction
   * ({@code COMMIT}, {@code ROLLBACK}, {@code SAVEPOINT}).
   *
   * <pre>{@code
   * Execution<Void> e = payments.execute(key, Fingerprint.ofFields(request),
   *     dsl.insertInto(PAYMENT).set(PAYMENT.REQUEST, request.id()).set(PAYMENT.AMOUNT, request.amount()),
   *     dsl.update(ACCOUNT).set(ACCOUNT.BALANCE, ACCOUNT.BALANCE.minus(request.amount())).where(ACCOUNT.ID.eq(request.account())));
   * }</pre>
   *
   * @param statements the effect: one or more statements, rendered and bound by idem's jOOQ
   *     configuration (their own {@code Configuration}, if attached, is not used)
   * @return {@link Execution.Applied} if the statements committed now (value null), {@link
   *     Execution.Replayed} if the key completed before (value null, whatever a callback stored
   *     under it), or {@link Execution.InFlight} if another copy held the key for longer than
   *     {@link Builder#inFlightWait}
   * @throws KeyReuseException if the key was first used with another fingerprint
   * @throws IllegalArgumentException if {@code statements} is null, empty or holds a null, or
   *     jOOQ cannot render or bind one of them (the statements are not sent; nothing of the call
   *     commits)
   * @throws DataAccessException what a statement (or the commit's deferred checks) failed with,
   *     after rolling it back with the claim
   */
  public Execution<Void> execute(IdempotencyKey key, Fingerprint fingerprint, Query... statements) {
    Query[] effect = checkArguments(key, fingerprint, statements);
    RunningKeys.refuseNested(idem, key);
    Tx open = idem.currentTransaction();
    if (open != null) {
      return joined(open.connection(), open.dsl(), key, fingerprint, Codec.none(), sent(effect), effect);
    }
    return owned(key, fingerprint, Codec.none(), sent(effect), effect);
  }

  /**
   * {@link #execute(IdempotencyKey, Fingerprint, Query...)} inside the caller's open transaction on
   * {@code callerTx}, under a savepoint, as {@link #execute(Connection, IdempotencyKey, Fingerprint,
   * Codec, TxCallback)} runs a callback: the savepoint, the claim, the statements and the release
   * of the savepoint go in one round trip. The caller commits or rolls back; an {@link
   * Execution.Applied} here means "recorded in your transaction".
   *
   * @throws IllegalArgumentException if {@code callerTx} is null, in auto-commit mode or aborted,
   *     or {@code statements} is null, empty or holds a null
   */
  public Execution<Void> execute(Connection callerTx, IdempotencyKey key, Fingerprint fingerprint, Query... statements) {
    Require.notNull(callerTx, "callerTx");
    Query[] effect = checkArguments(key, fingerprint, statements);
    return execute(callerTx, key, fingerprint, Codec.none(), sent(effect), effect);
  }

  /**
   * A call with no transaction open on this thread: a key handled lately is read first (one
   * auto-commit read answers most repeats); any other is claimed as the claim order, or the
   * statements ({@code statements} not null), have it.
   */
  private <T, X extends Exception> Execution<T> owned(IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec,
      TxCallback<T, X> effect, Query[] statements) throws X {
    Binds binds = new Binds(key, fingerprint);
    Execution<T> outcome;
    try {
      KeyTable.Row seen = null;
      if (recent.mightContain(key.scope(), key.value())) {
        // A key this process handled lately: most likely a repeat of a completed key, which one
        // auto-commit read answers with no transaction to end, as cheap as any primary-key read.
        seen = readRow(binds);
        if (seen != null && !seen.expirable()) {
          return reported(key, repeatOf(key, codec, seen, binds));
        }
      }
      if (seen != null) {
        // Only a row read past its window needs the claim-or-read statement, which re-claims it.
        outcome = claimFirst(table.claimLocal, key, fingerprint, codec, effect);
      } else if (statements != null) {
        outcome = sentWithClaim(key, fingerprint, codec, effect, binds, statements);
      } else if (claimOrder == ClaimOrder.AT_COMMIT) {
        outcome = applyThenClaim(key, fingerprint, codec, effect, binds);
      } else {
        // A key not seen lately (most calls carry a new key) goes straight to the plain claim
        // insert, the cheapest statement for a new key; if another copy's row is there, the claim
        // loop reads it in a new statement and replays it.
        outcome = claimFirst(table.claimLocalInsert, key, fingerprint, codec, effect);
      }
    } catch (Busy busy) {
      return inFlight(key, busy.retryAfter);
    }
    recent.remember(key.scope(), key.value());
    return reported(key, outcome);
  }

  /** {@link ClaimOrder#BEFORE_EFFECT} in a transaction of idem's: {@code claim}, then the effect. */
  private <T, X extends Exception> Execution<T> claimFirst(Sql claim, IdempotencyKey key, Fingerprint fingerprint,
      Codec<T> codec, TxCallback<T, X> effect) throws X {
    return ClaimRaced.rerun(idem, tx -> claimThenApply(tx, claim, key, fingerprint, codec, effect));
  }

  /**
   * The claim, the statements and {@code COMMIT} in one round trip. If the claim conflicted (or the
   * transaction failed with 40001 or 40P01), the call is made again with the claim in a round trip
   * of its own: it reads the row and replays, waits for a copy in flight, or re-claims a row past
   * its window, and then sends {@code effect}, the same statements.
   */
  private <T, X extends Exception> Execution<T> sentWithClaim(IdempotencyKey key, Fingerprint fingerprint,
      Codec<T> codec, TxCallback<T, X> effect, Binds binds, Query[] statements) throws X {
    try {
      return idem.inTransaction(tx -> {
        send(prepared(tx.connection(), table.claimFirst, binds, statements, KeyTable.COMMIT), true);
        return new Execution.Applied<>(null);
      });
    } catch (ClaimTaken taken) {
      return claimFirst(table.claimLocal, key, fingerprint, codec, effect);
    }
  }

  /**
   * {@code claim}, {@code statements} and {@code tail}, rendered and bound, not sent: a statement
   * jOOQ cannot render or bind is an {@link IllegalArgumentException} here, before any SQL.
   */
  private Pipelined prepared(Connection c, Sql claim, Binds binds, Query[] statements, String tail) {
    try {
      return Pipelined.prepare(c, idem.dsl(), claim.text(), claim.values(binds), statements, tail);
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /**
   * Sends {@code string} and closes it. A wait on another copy's claim past the bound is {@link
   * Busy}; in idem's own transaction ({@code owned}) a serialization failure or deadlock is {@link
   * ClaimTaken}, so the call is made again with the claim in a round trip of its own, which
   * retries as a callback's claim does. In the caller's transaction it is thrown: only the caller
   * can retry its transaction.
   */
  private void send(Pipelined string, boolean owned) {
    try (string) {
      string.send(idem.schema(), KeyTable.TABLE);
    } catch (SQLException e) {
      if (SqlStates.isLockTimeoutOn(e, KeyTable.PRIMARY_KEY)) {
        throw new Busy(retryAfter);
      }
      if (owned && SqlStates.isRetryable(e)) {
        throw new ClaimTaken();
      }
      throw failed(e);
    }
  }

  /** The statements as a callback, for a call whose claim took a round trip of its own. */
  private TxCallback<Void, RuntimeException> sent(Query[] statements) {
    return tx -> {
      try {
        Pipelined.run(tx.connection(), idem.dsl(), statements);
      } catch (SQLException e) {
        throw failed(e);
      }
      return null;
    };
  }

  /**
   * Runs {@code effect} once for {@code key} inside the caller's open transaction on {@code
   * callerTx}: the claim and the stored result are written there and commit or roll back with the
   * caller's own work. The executor never commits or rolls back the caller's transaction: it sets a
   * savepoint before the claim, and rolls back to it when the effect throws, the key is in flight
   * or reused, so the key is free again and the caller's transaction stays usable.
   *
   * <p>If the caller's transaction later rolls back, the effect and the key go with it: nothing
   * was committed, and a repeat runs again. An {@link Execution.Applied} here means "recorded in
   * your transaction", not "committed".
   *
   * <p>Under REPEATABLE READ and SERIALIZABLE a copy that loses a race for the key cannot see the
   * winner's row in its snapshot; PostgreSQL raises SQLSTATE 40001, which is thrown (wrapped in a
   * {@link DataAccessException}) after rolling back to the savepoint, because only the caller can
   * retry its transaction. {@link Idem#inTransaction} does so on its own.
   *
   * @param callerTx a connection with an open transaction (auto-commit off)
   * @throws IllegalArgumentException if {@code callerTx} is null, in auto-commit mode or aborted (a
   *     statement in it failed), before any SQL
   * @throws IllegalStateException if called from the effect of the same key on this thread
   * @throws DataAccessException if the rollback to the savepoint failed (the connection broke):
   *     then the caller's transaction is not usable and must be rolled back
   * @see #execute(IdempotencyKey, Fingerprint, Codec, TxCallback)
   */
  public <T, X extends Exception> Execution<T> execute(
      Connection callerTx, IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect)
      throws X {
    Require.notNull(callerTx, "callerTx");
    checkArguments(key, fingerprint, codec, effect, "effect");
    return execute(callerTx, key, fingerprint, codec, effect, null);
  }

  /**
   * A joined call on the caller's {@code callerTx}, its arguments checked: {@code effect} after a
   * claim of its own, or {@code statements} (if not null) sent with the claim.
   */
  private <T, X extends Exception> Execution<T> execute(Connection callerTx, IdempotencyKey key,
      Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect, Query[] statements) throws X {
    RunningKeys.refuseNested(idem, key);
    try {
      if (callerTx.getAutoCommit()) {
        throw new IllegalArgumentException(
            "callerTx is in auto-commit mode: pass a connection with an open transaction, or use"
                + " the execute method without one to let the executor own the transaction");
      }
    } catch (SQLException e) {
      throw new DataAccessException("could not read callerTx's auto-commit mode: " + e.getMessage(), e);
    }
    Tx open = idem.currentTransaction();
    DSLContext dsl = open != null && open.connection() == callerTx ? open.dsl() : idem.dsl(callerTx);
    return joined(callerTx, dsl, key, fingerprint, codec, effect, statements);
  }

  private <T, X extends Exception> Execution<T> joined(Connection c, DSLContext dsl, IdempotencyKey key,
      Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect, Query[] statements) throws X {
    Tx tx = new JoinedTx(c, dsl);
    Driver.refuseAborted(c, "key", key);
    // Rendered and bound before the try below: a statement refused here sent nothing, not even the
    // savepoint, so there is nothing to roll back to (and a savepoint of the same name, an outer
    // call's, must not be rolled back instead).
    Pipelined string = statements == null ? null
        : prepared(c, table.claimFirstJoined, new Binds(key, fingerprint), statements, KeyTable.RELEASE);
    Execution<T> outcome;
    try {
      if (string == null) {
        outcome = claimThenApply(tx, table.claimLocalJoined, key, fingerprint, codec, effect);
      } else {
        try {
          send(string, false);
          outcome = new Execution.Applied<>(null);
        } catch (ClaimTaken taken) {
          // The key has a row: back to before the claim, then the claim in a round trip of its own.
          rollbackToSavepoint(c, key);
          outcome = claimThenApply(tx, table.claimLocalJoined, key, fingerprint, codec, effect);
        }
      }
    } catch (Busy busy) {
      // InFlight promises a usable transaction: if the rollback fails, that failure is the answer.
      rollbackToSavepoint(c, key);
      return inFlight(key, busy.retryAfter);
    } catch (Throwable t) {
      try {
        rollbackToSavepoint(c, key);
      } catch (RuntimeException e) {
        t.addSuppressed(e);
      }
      throw t;
    }
    return reported(key, outcome);
  }

  /**
   * {@link ClaimOrder#AT_COMMIT} for a key not seen lately: the effect in a transaction of its own,
   * then the key row, completed with its result, and {@code COMMIT} in one round trip. The claim is
   * still one step under the unique index; it just comes last:
   *
   * <ul>
   *   <li>the key row conflicts (another copy committed it, or held it and then committed): the
   *       whole transaction rolls back, effect included, and the call is answered the way a claim
   *       before the effect answers it (replay, wait, or re-claim of a row past its window);
   *   <li>the effect fails: if that is because this is a repeat (the first copy's effect is there:
   *       a unique constraint, a balance already debited), the key row says so and the call is
   *       answered as a repeat; otherwise the failure is thrown as it was.
   * </ul>
   */
  private <T, X extends Exception> Execution<T> applyThenClaim(IdempotencyKey key, Fingerprint fingerprint,
      Codec<T> codec, TxCallback<T, X> effect, Binds binds) throws X {
    return AtCommit.run(idem,
        tx -> {
          T value = RunningKeys.run(idem, key, effect, tx);
          byte[] bytes = codec.storesNothing() ? null : encode(key, codec, value, "the effect was rolled back");
          claimAtCommit(tx.connection(), binds.result(bytes));
          return new Execution.Applied<>(value);
        },
        () -> ClaimRaced.rerun(idem, tx -> claimThenApply(tx, table.claimLocal, key, fingerprint, codec, effect)),
        failure -> {
          KeyTable.Row row;
          try {
            row = readRow(binds);
          } catch (RuntimeException e) {
            failure.addSuppressed(e);
            return null;
          }
          if (row == null || row.expirable()) {
            return null; // not a repeat: the effect's own failure
          }
          try {
            return repeatOf(key, codec, row, binds);
          } catch (KeyReuseException reuse) {
            reuse.addSuppressed(failure); // what the other request's effect ran into, for whoever debugs the client
            throw reuse;
          }
        },
        () -> "executor " + key);
  }

  /**
   * The at-commit key row and {@code COMMIT}. Only a conflict on the key table's own row is {@link
   * ClaimTaken}, and only a wait on its own index past the bound is {@link Busy}: the same round
   * trip's {@code COMMIT} runs the caller's deferred checks, whose failures are the caller's.
   */
  private void claimAtCommit(Connection c, Binds binds) {
    try {
      KeyTable.run(c, table.claimAtCommit, binds);
    } catch (SQLException e) {
      if (SqlStates.isUniqueViolationOn(e, idem.schema(), KeyTable.TABLE)) {
        throw new ClaimTaken();
      }
      if (SqlStates.isLockTimeoutOn(e, KeyTable.PRIMARY_KEY)) {
        throw new Busy(retryAfter);
      }
      throw failed(e);
    }
  }

  /**
   * {@link ClaimOrder#BEFORE_EFFECT}: the local claim, then the effect, on {@code tx}. Owned: the
   * transaction is idem's and this ends it when it stores a result (the result and COMMIT go in one
   * round trip). Joined: a savepoint is set before the claim and released at the end; on failure
   * the caller of this rolls back to it.
   */
  private <T, X extends Exception> Execution<T> claimThenApply(Tx tx, Sql claim, IdempotencyKey key,
      Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect) throws X {
    Connection c = tx.connection();
    boolean joined = claim == table.claimLocalJoined;
    Binds binds = new Binds(key, fingerprint);
    boolean owned = !joined;
    KeyTable.Row row = claim(c, claim, joined ? KeyTable.CLAIM_LOCAL_JOINED_RESULT : KeyTable.CLAIM_LOCAL_RESULT, binds,
        KeyTable::row, owned);
    for (int round = 0; ; round++) {
      if (round >= MAX_CLAIM_ROUNDS) {
        throw new DataAccessException("could not claim or read key " + key + " in " + MAX_CLAIM_ROUNDS
            + " rounds: its row kept changing");
      }
      if (row == null) {
        // The claim inserted nothing and saw no row: another copy's claim got there first (the
        // claim waited for it, and under READ COMMITTED this statement's snapshot predates its
        // commit). Read the row in a new statement; if it is gone (rolled back, or expired and
        // deleted meanwhile), claim again.
        row = read(c, binds, owned);
        if (row == null) {
          row = claim(c, table.claimLocal, KeyTable.CLAIM_LOCAL_RESULT, binds, KeyTable::row, owned);
        }
        continue;
      }
      if (row.claimed()) {
        return applyLocal(tx, joined, key, codec, effect, binds);
      }
      if (row.expirable()) {
        if (claim(c, table.reclaimLocal, 1, binds, KeyTable::single, owned) != null) {
          return applyLocal(tx, joined, key, codec, effect, binds);
        }
        row = read(c, binds, owned); // another copy re-claimed it first
        continue;
      }
      Execution<T> repeat = repeatOf(key, codec, row, binds);
      if (joined) {
        run(c, table.release, binds);
      }
      return repeat;
    }
  }

  /**
   * The answer to a local call that found the key's row, within its window: the replay, {@link
   * KeyReuseException}, or (an external claim in flight, whose call may or may not have gone out)
   * {@link Busy}.
   */
  private <T> Execution<T> repeatOf(IdempotencyKey key, Codec<T> codec, KeyTable.Row row, Binds binds) {
    checkFingerprint(key, row, binds);
    if (row.completed()) {
      return replay(key, codec, row);
    }
    throw new Busy(row.leaseLive() ? row.leaseLeft() : retryAfter);
  }

  private <T, X extends Exception> Execution<T> applyLocal(Tx tx, boolean joined, IdempotencyKey key,
      Codec<T> codec, TxCallback<T, X> effect, Binds binds) throws X {
    T value = RunningKeys.run(idem, key, effect, tx);
    byte[] bytes = codec.storesNothing() ? null : encode(key, codec, value, "the effect was rolled back");
    if (bytes != null) {
      run(tx.connection(), joined ? table.storeResultAndRelease : table.storeResultAndCommit, binds.result(bytes));
    } else if (joined) {
      run(tx.connection(), table.release, binds);
    }
    // Owned with nothing to store: the row was written completed by the claim, and idem commits.
    return new Execution.Applied<>(value);
  }

  // ---------------------------------------------------------------------------------------------
  // External effects

  /**
   * Runs an external effect (a card charge, an email) once for {@code key}, in three phases:
   *
   * <ol>
   *   <li>claim: the key's row is inserted in flight, with the fingerprint, the call key (the
   *       persisted intent), fencing token 1 and a lease of {@link Builder#lease} by the database
   *       clock, and committed at once;
   *   <li>call: {@code call} runs outside any transaction, given an {@link ExternalAttempt} with
   *       the token and the call key ({@code Keys.child(key, "external")}, the same for every
   *       attempt: send it to the provider so the provider dedupes);
   *   <li>record: the result is stored and the key completed, only if the row still carries this
   *       attempt's token.
   * </ol>
   *
   * <p>A copy that finds a live lease polls (re-reading the row) up to {@link
   * Builder#inFlightWait}, then gets {@link Execution.InFlight} with the lease's remaining time as
   * retry-after. A copy that finds the lease ended takes the claim over with token + 1 and calls
   * again (takeover = true). A holder whose token is no longer the highest when it records gets
   * {@link StaleFenceException}, and nothing it did is stored.
   *
   * <p>When {@code call} throws, the exception is rethrown and the attempt's lease is ended at
   * once (the row stays in flight: the call may or may not have reached the provider). The next
   * repeat takes over, asks the resolver if one is given, and otherwise calls again with the same
   * call key. A value the call returns (a decline) is a result: stored and replayed.
   *
   * <p>Never joins a transaction, even inside {@link Idem#inTransaction}: phase 1 must commit
   * before the call goes out.
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
    RunningKeys.refuseNested(idem, key);
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
    RunningKeys.refuseNested(idem, key);
    return external(key, fingerprint, codec, call, resolver);
  }

  private <T, X extends Exception, Y extends Exception> Execution<T> external(IdempotencyKey key,
      Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call, Resolver<T, Y> resolver) throws X, Y {
    Binds binds = new Binds(key, fingerprint);
    IdempotencyKey callKey = Keys.child(key, "external");
    binds.callKey = callKey.value();
    long waitUntil = System.nanoTime() + inFlightWait.toNanos(); // only this caller's patience
    Duration poll = FIRST_POLL;
    KeyTable.Row row = externalWrite(c -> KeyTable.row(c, table.claimExternal, 0, binds));
    for (int round = 0; ; ) {
      if (row == null) {
        if (++round >= MAX_CLAIM_ROUNDS) {
          throw new DataAccessException("could not claim or read key " + key + " in " + MAX_CLAIM_ROUNDS
              + " rounds: its row kept changing");
        }
        row = readRow(binds);
        if (row == null) {
          row = externalWrite(c -> KeyTable.row(c, table.claimExternal, 0, binds));
        }
        continue;
      }
      if (row.claimed()) {
        return callOut(new ExternalAttempt(key, callKey, new FencingToken(row.fence()), false), codec, call, (Resolver<T, Y>) null, binds);
      }
      if (row.expirable()) {
        // A new life of the key, under the same call key (a provider that still remembers it
        // absorbs a late repeat). If the last life's attempt never finished (its holder died)
        // and this is the same intent, it is a takeover of that attempt: the resolver is asked.
        boolean unfinished = !row.completed() && binds.sameFingerprint(row.fingerprint());
        Long fence = externalWrite(c -> KeyTable.single(c, table.reclaimExternal, 0, binds));
        if (fence != null) {
          if (unfinished) {
            events.leaseTakenOver(key, row.fence(), fence);
          }
          return callOut(new ExternalAttempt(key, callKey, new FencingToken(fence), unfinished), codec, call,
              unfinished ? resolver : null, binds);
        }
        row = null;
        continue;
      }
      checkFingerprint(key, row, binds);
      if (row.completed()) {
        return reported(key, replay(key, codec, row));
      }
      if (!row.leaseLive()) {
        long previous = row.fence();
        Long fence = externalWrite(c -> KeyTable.single(c, table.takeOver, 0, binds.fence(previous)));
        if (fence == null) {
          row = null; // another copy took over or completed first: look again
          continue;
        }
        events.leaseTakenOver(key, previous, fence);
        return callOut(new ExternalAttempt(key, callKey, new FencingToken(fence), true), codec, call, resolver, binds);
      }
      long left = waitUntil - System.nanoTime();
      if (left <= 0) {
        return inFlight(key, row.leaseLeft());
      }
      try {
        Thread.sleep(Math.min(poll.toMillis(), Math.max(1, left / 1_000_000)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return inFlight(key, row.leaseLeft());
      }
      poll = poll.multipliedBy(2).compareTo(LONGEST_POLL) > 0 ? LONGEST_POLL : poll.multipliedBy(2);
      row = readRow(binds);
    }
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
      value = known.isPresent() ? known.get() : call.call(attempt);
      bytes = codec.storesNothing() ? null
          : encode(attempt.key(), codec, value, "the call's lease was ended so that a repeat takes over");
    } catch (Throwable t) {
      endLease(binds, token, t);
      throw t;
    }
    Long recorded = record(binds.fence(token).result(bytes), token);
    if (recorded == null) {
      Long highest = read(c -> KeyTable.single(c, table.fenceOf, 0, binds));
      StaleFenceException stale = new StaleFenceException("key " + attempt.key(), token, highest == null ? 0 : highest);
      events.staleFence(stale.resource(), stale.token(), stale.highest());
      throw stale;
    }
    events.applied(attempt.key());
    return new Execution.Applied<>(value);
  }

  /**
   * Phase 3's fenced write; null if another attempt holds the key now. A 40001 (the pool at
   * REPEATABLE READ or SERIALIZABLE) means the row changed under the statement, or, at
   * SERIALIZABLE, only that the statement touched what another transaction did (index pages): if
   * the row still carries this token, in flight, the write is tried again, so a holder that is
   * still the highest is never told it was taken over.
   */
  private Long record(Binds binds, long token) {
    for (int round = 1; ; round++) {
      Long recorded = externalWrite(c -> KeyTable.single(c, table.complete, 0, binds));
      if (recorded != null) {
        return recorded;
      }
      KeyTable.Row row = readRow(binds);
      if (row == null || row.completed() || row.fence() != token) {
        return null;
      }
      if (round >= MAX_CLAIM_ROUNDS) {
        throw new DataAccessException("could not record the result of key " + binds.key + " in " + MAX_CLAIM_ROUNDS
            + " rounds: each failed with a serialization failure; the key stays in flight until its lease ends");
      }
    }
  }

  private void endLease(Binds binds, long token, Throwable failure) {
    try {
      externalWrite(c -> KeyTable.run(c, table.endLease, binds.fence(token)));
    } catch (RuntimeException e) {
      failure.addSuppressed(e); // the lease then ends on its own; the call's failure matters more
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Expiry

  /**
   * Deletes keys past their window (by the database clock), at most {@link
   * Builder#expiryBatches batch size} per transaction and at most that many batches per call, so
   * expiry never runs one long DELETE. A repeat of a deleted key is no longer recognised and runs
   * again; a key past its window is treated as gone even before it is deleted.
   *
   * <p>Keys of external effects are never deleted here: their fencing token must keep growing
   * across the key's lives, and a deleted row would restart it at 1, letting a stalled holder of
   * the old life record its result over the new intent's. A new intent on such a key past its
   * window re-claims the row with a higher token instead. Delete them yourself only when no holder
   * of theirs can still be running.
   *
   * @return how many keys were deleted; call again while it returns the maximum
   */
  public int expire() {
    long deleted = Expiry.deleteInBatches(idem, KeyTable.KEYS, KeyTable.EXPIRABLE.and(KeyTable.CALL_KEY.isNull()), expiryBatchSize, expiryMaxBatches);
    if (deleted > 0) {
      events.expired(deleted);
    }
    return (int) Math.min(deleted, Integer.MAX_VALUE);
  }

  /** The window keys of this executor are remembered for. */
  public DedupeWindow window() {
    return window;
  }

  // ---------------------------------------------------------------------------------------------
  // Shared steps

  /** The statements form's checks; returns the statements copied. */
  private static Query[] checkArguments(IdempotencyKey key, Fingerprint fingerprint, Query[] statements) {
    Require.notNull(key, "key");
    Require.notNull(fingerprint, "fingerprint");
    return Pipelined.checked(statements, "statements");
  }

  private static void checkArguments(IdempotencyKey key, Fingerprint fingerprint, Codec<?> codec, Object work, String workName) {
    Require.notNull(key, "key");
    Require.notNull(fingerprint, "fingerprint");
    Require.notNull(codec, "codec");
    Require.notNull(work, workName);
  }

  /**
   * Refuses another request under a key the row still holds for its intent. A row past its window
   * belongs to no intent a caller can reuse: what keeps it (an external attempt whose lease is still
   * live) makes the caller wait or answers in flight, and once the lease ends the key is claimed
   * as a new intent, so a refusal now would not be the final answer it claims to be.
   */
  private void checkFingerprint(IdempotencyKey key, KeyTable.Row row, Binds binds) {
    if (!row.pastWindow() && !binds.sameFingerprint(row.fingerprint())) {
      events.fingerprintMismatch(key);
      throw new KeyReuseException(key, new Fingerprint(HexFormat.of().formatHex(row.fingerprint())), binds.fingerprint);
    }
  }

  private static <T> byte[] encode(IdempotencyKey key, Codec<T> codec, T value, String consequence) {
    try {
      return codec.encode(value);
    } catch (Exception e) {
      throw new CodecException("the result for key " + key + " could not be encoded by " + codec + " ("
          + e + "), so it could not be stored for replay; " + consequence + " and nothing was stored", e);
    }
  }

  private static <T> Execution<T> replay(IdempotencyKey key, Codec<T> codec, KeyTable.Row row) {
    T value;
    try {
      value = codec.decode(row.result());
    } catch (Exception e) {
      throw new CodecException("the stored result for key " + key + " could not be decoded by " + codec + " ("
          + e + "); the key stays completed and its effect does not run again", e);
    }
    return new Execution.Replayed<>(value, row.completedAt(), row.age());
  }

  /** Emits the event of an outcome decided (and, when owned, committed). */
  private <T> Execution<T> reported(IdempotencyKey key, Execution<T> outcome) {
    if (outcome instanceof Execution.Replayed<T> r) {
      events.replayed(key, r.age(), window);
    } else if (outcome instanceof Execution.Applied<T>) {
      events.applied(key);
    }
    return outcome;
  }

  private <T> Execution<T> inFlight(IdempotencyKey key, Duration after) {
    Duration wait = after == null || after.compareTo(Duration.ZERO) <= 0 ? retryAfter : after;
    events.inFlight(key, wait);
    return new Execution.InFlight<>(key.toString(), wait);
  }

  /** A claim statement: a lock wait past the bound (55P03) means another copy holds the key. */
  /** A local claim statement, before the effect; {@code owned}: in idem's own transaction. */
  private <R> R claim(Connection c, Sql sql, int index, Binds binds, Statement<R> statement, boolean owned) {
    try {
      return statement.run(c, sql, index, binds);
    } catch (SQLException e) {
      if (SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE)) {
        throw new Busy(retryAfter);
      }
      throw claimFailed(e, owned);
    }
  }

  /** The claim loop's re-read of the key's row, before the effect. */
  private KeyTable.Row read(Connection c, Binds binds, boolean owned) {
    try {
      return KeyTable.row(c, table.read, 0, binds);
    } catch (SQLException e) {
      throw claimFailed(e, owned);
    }
  }

  /**
   * A claim-stage failure. In idem's own transaction a lost race (40001 / 40P01: at REPEATABLE READ
   * or SERIALIZABLE, the claim waited for another copy's row, which then committed) is {@link
   * ClaimRaced}, and the call runs again before the effect ever ran, not counted against the
   * re-runs for failures after it; in the caller's transaction it is the caller's to retry.
   */
  private static RuntimeException claimFailed(SQLException e, boolean owned) {
    return ClaimRaced.orFailure(owned, failed(e));
  }

  private static void run(Connection c, Sql sql, Binds binds) {
    try {
      KeyTable.run(c, sql, binds);
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /** Undoes a joined call's claim; if that fails, the caller's transaction is not usable and says so. */
  private void rollbackToSavepoint(Connection c, IdempotencyKey key) {
    try {
      KeyTable.run(c, table.rollbackToSavepoint, null);
    } catch (SQLException e) {
      throw new DataAccessException("idem executor: could not roll back to the savepoint before the claim of key "
          + key + ", so the caller's transaction may hold it or be aborted; roll the transaction back: "
          + e.getMessage(), e);
    }
  }

  /** Runs {@code work} on a connection of its own in auto-commit mode: each statement commits. */
  private <R> R autocommit(AutoCommit.Work<R> work) {
    return AutoCommit.run(idem.dataSource(), "idem executor", work);
  }

  /** The key's row as a new statement sees it, or null: {@link #read} of {@link KeyTable#read}. */
  private KeyTable.Row readRow(Binds binds) {
    return read(c -> KeyTable.row(c, table.read, 0, binds));
  }

  /**
   * An auto-commit read, run again in a new snapshot if it fails with 40001: at SERIALIZABLE even
   * a lone read can be chosen to break a cycle of read/write dependencies, and it wrote nothing, so
   * running it again answers what the caller asked. Never for a write: {@link #externalWrite}
   * answers a write's 40001 itself.
   */
  private <R> R read(AutoCommit.Work<R> work) {
    return AutoCommit.runAgainOnSerializationFailure(idem.dataSource(), "idem executor", work);
  }

  /**
   * An external-mode write, in auto-commit like every external statement. Auto-commit statements
   * run at the pool's isolation level: at REPEATABLE READ or SERIALIZABLE, one that waited for
   * another copy's write to the key's row fails with 40001 once that write commits, because the row
   * changed under its snapshot. That is the case zero rows stand for under READ COMMITTED, and it
   * is answered the same way: null, so the caller looks at the row again in a new statement. The
   * failed statement wrote nothing.
   */
  private <R> R externalWrite(AutoCommit.Work<R> work) {
    try {
      return autocommit(work);
    } catch (DataAccessException e) {
      if (SqlStates.is(e, SqlStates.SERIALIZATION_FAILURE)) {
        return null;
      }
      throw e;
    }
  }

  private static DataAccessException failed(SQLException e) {
    return new DataAccessException("idem executor: " + e.getMessage(), e);
  }

  @FunctionalInterface
  private interface Statement<R> {
    R run(Connection c, Sql sql, int index, Binds binds) throws SQLException;
  }

  private record JoinedTx(Connection connection, DSLContext dsl) implements Tx {}

  /**
   * Configures an {@link IdempotentExecutor}. Validates and copies in {@link #build()}; the executor
   * is immutable.
   */
  public static final class Builder {
    private final Idem idem;
    private DedupeWindow window = DedupeWindow.covering(RepeatSource.CLIENT_RETRY);
    private Duration inFlightWait = Duration.ofSeconds(2);
    private Duration lease = Duration.ofSeconds(30);
    private Duration retryAfter = Duration.ofSeconds(1);
    private ClaimOrder claimOrder = ClaimOrder.BEFORE_EFFECT;
    private String name = "executor";
    private int expiryBatchSize = 1000;
    private int expiryMaxBatches = 100;

    private Builder(Idem idem) {
      this.idem = Require.notNull(idem, "idem");
    }

    /**
     * How long a key is remembered after it is claimed, by the database clock; default {@link
     * RepeatSource#CLIENT_RETRY} (24 h). Size it by the slowest path a repeat can take; at most 100
     * years.
     */
    public Builder window(DedupeWindow window) {
      this.window = window;
      return this;
    }

    /**
     * How long a repeat waits for the first copy before it is answered {@link Execution.InFlight};
     * default 2 s. A local effect's repeat blocks on the key's unique index (PostgreSQL {@code
     * lock_timeout}, set for the key insert only and restored after it) and wakes the moment the
     * first copy commits or rolls back; with {@link ClaimOrder#AT_COMMIT} it blocks there at its
     * commit, and before that its own effect may wait, unbounded by this, on locks the first copy's
     * effect holds. An external effect's repeat polls the row. {@code Duration.ZERO} answers at once (the
     * claim still waits 1 ms, PostgreSQL's smallest lock timeout). The wait holds a connection. At most
     * 2^31 - 1 ms (about 24.8 days), the longest {@code lock_timeout} PostgreSQL takes.
     */
    public Builder inFlightWait(Duration wait) {
      this.inFlightWait = wait;
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
     * The retry-after told to a local-effect repeat that found the first copy still running
     * after {@link #inFlightWait}; default 1 s. (External effects answer the lease's time left.)
     */
    public Builder retryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
      return this;
    }

    /**
     * When a local effect's key row is written in a transaction the executor owns: {@link
     * ClaimOrder#BEFORE_EFFECT} (default; a recognised repeat never runs the callback) or {@link
     * ClaimOrder#AT_COMMIT} (one round trip fewer per new key; a repeat not recognised beforehand
     * runs the callback and is rolled back). Either way at most one effect per key is committed.
     * Calls that join a caller's transaction, effects given as statements ({@link
     * IdempotentExecutor#execute(IdempotencyKey, Fingerprint, Query...)}: claim, statements and
     * COMMIT in one round trip) and external effects always claim first.
     */
    public Builder claimOrder(ClaimOrder order) {
      this.claimOrder = order;
      return this;
    }

    /** The source name events carry, e.g. {@code "executor:payments"}; default {@code "executor"}. */
    public Builder name(String name) {
      this.name = name;
      return this;
    }

    /**
     * How many expired keys {@link IdempotentExecutor#expire()} deletes per transaction (default
     * 1000) and at most how many such batches one call runs (default 100).
     */
    public Builder expiryBatches(int batchSize, int maxBatches) {
      this.expiryBatchSize = batchSize;
      this.expiryMaxBatches = maxBatches;
      return this;
    }

    /** @throws IllegalArgumentException naming the setting that is missing or out of range */
    public IdempotentExecutor build() {
      Require.notNull(window, "window");
      DbTime.bounded(window.length(), "window");
      Require.notNegative(inFlightWait, "inFlightWait");
      Require.atMost(inFlightWait, LONGEST_LOCK_WAIT, "inFlightWait", "PostgreSQL's lock_timeout holds at most 2^31 - 1 ms");
      DbTime.bounded(Require.positive(lease, "lease"), "lease");
      Require.positive(retryAfter, "retryAfter");
      Require.notNull(claimOrder, "claimOrder");
      IdempotencyKey.check("name", name);
      Require.positive(expiryBatchSize, "expiry batch size");
      Require.positive(expiryMaxBatches, "expiry max batches");
      return new IdempotentExecutor(this);
    }
  }
}
