package dev.idem.jdbc.internal.claim;

import dev.idem.internal.Events;
import dev.idem.jdbc.internal.ClaimSignal;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.internal.Expiry;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.Pipelined;
import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.jdbc.internal.RepeatShare;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.jdbc.tx.TxConsumer;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HexFormat;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The claim engine: the one implementation of the claim protocol under the executor's local
 * effects, the inbox and the per-entity sequences. Claim first under a unique key, run the
 * effect, store the outcome with it, answer a repeat from the row, wait a bounded time for a copy
 * in flight, re-claim a row past its window. Each guard configures one over its {@link
 * ClaimTable}; a sequence's claim raises a number rather than inserting a key, and its row has no
 * window (see {@link ClaimTable.Kind}). Not an API.
 *
 * <p>A new key on a call that owns its transaction costs what the bare effect costs in round trips
 * (the claim goes with {@code BEGIN}; statements go with the claim and {@code COMMIT} in one
 * string). A repeat of a completed key writes nothing. Claimed first, it costs two round trips
 * on PostgreSQL: for a callback the claim, which inserts nothing, then the read of the row with
 * the rollback of the empty transaction (on MariaDB three: the read, then the commit); for
 * statements the claim, which stops them, then the rollback. Read
 * first, one: a call that owns its transaction reads first when its key was handled here lately,
 * or when most of this guard's calls lately were repeats ({@link RepeatShare}); a new key then
 * pays the read. From memory, none: a completed row this guard applied or answered from lately
 * answers a repeat of its key for a short while ({@link RecentAnswers}).
 */
public final class Claims {
  /** Rounds of claim-and-read before giving up on a row that keeps changing under the claim. */
  static final int MAX_CLAIM_ROUNDS = 10;
  private static final Query SAVEPOINT = DSL.query("savepoint " + ClaimTable.SAVEPOINT);

  final Context context;
  final ClaimTable table;
  final Events events;
  /** The window events report a replay against; null for sequences, which have none (and report their own events). */
  final DedupeWindow window;
  final Duration retryAfter;
  final String name;
  private final RecentKeys recent = new RecentKeys();
  /**
   * Whether a key handled here lately is read first: not for sequences, whose entity's next event
   * carries a new number (a repeat of them is told by the share of repeats alone).
   */
  private final boolean readsRecent;
  /** Whether this guard's calls lately were mostly repeats: then a call reads before it claims. */
  private final RepeatShare repeats = new RepeatShare();
  /** Completed rows applied or read here lately, which answer a repeat without a round trip (not for sequences). */
  private final RecentAnswers answers;

  /**
   * The claim sent before a call's statements and COMMIT, in one string: [claim or signal], or
   * [prelude, claim or signal] once this guard met a session with a statement_timeout ({@link
   * #prefaced}); in the caller's transaction, each after [savepoint]. Indexed by {@link #signal}.
   */
  private final Sql[] claimSignal;
  /**
   * Whether a statements form's claim met a session with a statement_timeout, which PostgreSQL arms
   * when a statement starts: from then on this guard's claims are sent after the statement that
   * lifts it, so that they wait the full bound (a pool sets its sessions alike).
   */
  private volatile boolean prefaced;
  /**
   * MariaDB's statements form: the head of the compound statement that claims, runs the statements
   * and commits in one round trip ({@link MariaDbClaimSql#compoundClaim}); null on PostgreSQL and
   * for sequences.
   */
  private final Sql compoundClaim;
  /**
   * Whether a compound statement met a session with a max_statement_time, which would bound the
   * claim's wait with the rest of the statement: from then on this guard's statements take the
   * callback's way, whose claim lifts it for its own statement (a pool sets its sessions alike).
   */
  private volatile boolean timedSessions;
  /** [claim]: a callback's claim, one statement (see {@link ClaimTable#claim}). */
  private final Sql claim;
  /** [savepoint, claim]: a joined callback's claim, result at 1. */
  private final Sql claimJoined;
  /**
   * [restore and read, rollback]: after a claim in a transaction of idem's own that inserted
   * nothing, the key's row and the end of that transaction, which wrote nothing (PostgreSQL; null
   * on MariaDB, whose read is statements sent one by one, and for sequences).
   */
  private final Sql readAndEnd;
  /** [re-claim past the window]: 1 if re-claimed, or null. */
  private final Sql reclaim;
  private final Sql storeAndCommit;
  private final Sql storeAndRelease;
  private final Sql release;
  /** The batch form of the protocol, for a table that has one (the inbox); else null. */
  private final BatchClaims batches;
  /**
   * How many joined calls run on this thread, the innermost last. PostgreSQL stacks savepoints of
   * one name, and a call joined inside another's effect sets and releases its own above the
   * outer's; MariaDB (InnoDB) replaces a savepoint of the same name, so there the inner call's
   * release took the outer's away, and the outer could neither release nor roll back to it. On
   * MariaDB a call at depth n above 1 names its savepoint {@code idem_claim_n} ({@link #nested}).
   */
  private static final ThreadLocal<int[]> JOINED_DEPTH = ThreadLocal.withInitial(() -> new int[1]);
  /** MariaDB: the savepoint statements of joined calls at depth 2 and more, by depth. */
  private final java.util.concurrent.ConcurrentMap<Integer, Savepoint> nested = new java.util.concurrent.ConcurrentHashMap<>();
  /** The savepoint statements of a joined call at depth 1 (every one on PostgreSQL). */
  private final Savepoint outermost;

  /** A joined call's statements that name its savepoint. */
  private record Savepoint(Sql claimJoined, Sql release, Sql storeAndRelease, String rollback) {}

  public Claims(Context context, ClaimTable table, Events events, DedupeWindow window, Duration retryAfter, String name) {
    this.context = context;
    this.table = table;
    this.events = events;
    this.window = window;
    this.retryAfter = retryAfter;
    this.name = name;
    this.readsRecent = table.layout.kind() != ClaimTable.Kind.SEQUENCES;
    this.answers = RecentAnswers.keptFor(readsRecent ? context.answersFromMemory() : Duration.ZERO);
    DSLContext dsl = context.dsl();
    // a table without a statements form (sequences) has no claim-or-signal
    Sql savepoint = Sql.of(dsl, SAVEPOINT);
    this.claimSignal = table.claimOrSignal == null ? null : new Sql[] {
        table.claimOrSignal, Sql.join(table.prelude, table.claimOrSignalPrefaced),
        Sql.join(savepoint, table.claimOrSignal), Sql.join(savepoint, table.prelude, table.claimOrSignalPrefaced)};
    this.compoundClaim = table.mariadb == null ? null : table.mariadb.compoundClaim;
    this.claim = table.claim;
    this.claimJoined = Sql.join(savepoint, table.claim);
    this.reclaim = table.reclaim;
    this.readAndEnd = table.restoreAndRead == null || context.mariadb() ? null
        : Sql.join(table.restoreAndRead, Sql.of(dsl, DSL.query("rollback")));
    this.release = Sql.of(dsl, DSL.query(ClaimTable.RELEASE));
    this.storeAndCommit = table.storeResult == null ? null : Sql.join(table.storeResult, Sql.of(dsl, DSL.query("commit")));
    this.storeAndRelease = table.storeResult == null ? null : Sql.join(table.storeResult, release);
    this.batches = table.layout.kind() == ClaimTable.Kind.INBOX ? new BatchClaims(this) : null;
    this.outermost = new Savepoint(claimJoined, release, storeAndRelease, ClaimTable.ROLLBACK_TO_SAVEPOINT);
  }

  /** The savepoint statements of the joined call running on this thread (see {@link #JOINED_DEPTH}). */
  private Savepoint savepoint() {
    int depth = JOINED_DEPTH.get()[0];
    if (depth <= 1 || !context.mariadb()) {
      return outermost;
    }
    return nested.computeIfAbsent(depth, d -> {
      DSLContext dsl = context.dsl();
      String name = ClaimTable.SAVEPOINT + "_" + d;
      Sql release = Sql.of(dsl, DSL.query("release savepoint " + name));
      return new Savepoint(Sql.join(Sql.of(dsl, DSL.query("savepoint " + name)), table.claim), release,
          table.storeResult == null ? null : Sql.join(table.storeResult, release),
          "rollback to savepoint " + name + ";\nrelease savepoint " + name);
    });
  }

  /** The batch form of the protocol on this table: the inbox's. */
  public BatchClaims batches() {
    if (batches == null) {
      throw new IllegalStateException(name + " has no batch claim");
    }
    return batches;
  }

  public ClaimTable table() {
    return table;
  }

  /**
   * Runs a local effect once for the key in {@code binds}: in {@code caller}'s transaction if given
   * (under a savepoint), else in the one open on this thread, else in a transaction of its own. The
   * effect is {@code effect}, or {@code statements} (if not null) sent with the claim.
   */
  public <T, X extends Exception> Execution<T> execute(Tx caller, Binds binds, Codec<T> codec, TxCallback<T, X> effect,
      Query[] statements) throws X {
    RunningKeys.refuseNested(context, table.layout, binds.key);
    long started = System.nanoTime();
    Tx open = caller != null ? caller : context.current();
    try {
      if (open != null) {
        // Claim first, in the caller's transaction: a read first would take a second pool
        // connection while the caller holds one, and answer from outside the caller's snapshot.
        return settled(binds.key, joined(open, binds, codec, effect, statements, started));
      }
      IdempotencyKey key = binds.key;
      ClaimRow kept = answers.answer(key);
      if (kept != null) {
        return settled(key, answer(kept, binds, codec)); // a row this guard applied or read lately
      }
      if ((readsRecent && recent.mightContain(key.scope(), key.value())) || repeats.mostlyRepeats()) {
        // Most likely a repeat (a key handled here lately, or a guard that gets mostly repeats):
        // one auto-commit read answers a completed row within its window, judged as the claim
        // judges it. Anything else (no row, in flight, past the window) is the claim's to decide.
        ClaimRow seen = read(binds, started);
        if (seen != null && seen.completed() && !seen.pastWindow()) {
          answers.remember(key, seen, System.nanoTime(), started);
          return settled(key, answer(seen, binds, codec));
        }
      }
      Execution<T> outcome = owned(binds, codec, effect, statements, started);
      if (readsRecent) {
        recent.remember(key.scope(), key.value());
        if (binds.answered != null) {
          // committed, or a repeat answered from its row
          answers.remember(key, binds.answered, binds.answeredAt, started);
        }
      }
      return settled(key, outcome);
    } catch (Busy busy) {
      repeats.record(false);
      return inFlight(binds.key, busy.retryAfter);
    }
  }

  /** An effect that returns nothing, as the engine's callback (its result: none, stored as none). */
  public static <X extends Exception> TxCallback<Void, X> callback(TxConsumer<X> effect) {
    return tx -> {
      effect.accept(tx);
      return null;
    };
  }

  /** Reports a call's outcome, and counts it for {@link #repeats}. */
  private <T> Execution<T> settled(IdempotencyKey key, Execution<T> outcome) {
    repeats.record(outcome.replayed());
    return reported(key, outcome);
  }

  /**
   * A call that owns its transaction. A callback: in a transaction of its own, claim the key (a
   * new key's claim goes with {@code BEGIN}; a repeat's claim inserts nothing, and the repeat is
   * answered from the row then read, having written nothing, with the transaction's end), then run the
   * effect, or replay, wait, or re-claim a row past its window. Statements: first sent with the
   * claim (see {@link #sentWithClaim}); only a key whose row that could not answer from takes the
   * callback's path. Runs that fail with 40001, 40P01 or 53200 run again under the retry budget.
   */
  private <T, X extends Exception> Execution<T> owned(Binds binds, Codec<T> codec, TxCallback<T, X> effect,
      Query[] statements, long started) throws X {
    boolean[] ran = new boolean[1]; // whether the caller's effect ran in the run that failed
    TxCallback<T, X> given = statements != null ? sent(statements) : effect;
    TxCallback<T, X> work = tx -> {
      ran[0] = true;
      return given.apply(tx);
    };
    Context.Runs runs = context.runs();
    boolean first = statements != null && claimSignal != null;
    boolean compound = statements != null && compoundClaim != null && !timedSessions;
    while (true) {
      ran[0] = false;
      try {
        if (compound) {
          compound = false;
          try {
            Execution<T> outcome = sentInCompound(binds, codec, statements, started);
            if (outcome != null) {
              return outcome;
            }
          } catch (RuntimeException e) {
            if (!SqlStates.isRetryable(e)) {
              throw e;
            }
            // rolled back whole: the next run claims in a statement of its own, as on PostgreSQL
          }
        }
        if (first) {
          first = false;
          try {
            Execution<T> outcome = sentWithClaim(binds, statements);
            if (outcome != null) {
              return outcome;
            }
          } catch (RuntimeException e) {
            if (!SqlStates.isRetryable(e)) {
              throw e;
            }
            // Which statement of the string was refused is unknown: the next run sends the claim
            // in a statement of its own, which tells a lost claim from the statements' own failure.
          }
        }
        TxCallback<Execution<T>, X> once = tx -> claimThenApply(tx, binds, codec, work, started, false);
        // On MariaDB statements take this path when the compound statement could not answer:
        // they are the caller's, but no code of theirs runs, so no framework is lent the transaction,
        // as none is on PostgreSQL's one-trip path.
        return statements != null && claimSignal == null ? context.ownedOnceByIdem(once) : context.ownedOnce(once);
      } catch (ClaimSignal signal) {
        throw signal;
      } catch (Exception e) {
        if (!runs.again(e, ran[0])) {
          throw e;
        }
      }
    }
  }

  /**
   * The statements form's path, one round trip for a new key: the claim, the statements and
   * {@code COMMIT} in one string, in a transaction of idem's own (pgjdbc sends its {@code BEGIN}
   * with them; an explicit transaction, because pgjdbc may split a long string with a Sync, which
   * would commit an implicit one part way). A key that has a row raises idem's signal at the claim,
   * so PostgreSQL skips the statements, having written nothing (the signal is an ERROR, and
   * PostgreSQL logs it as one), and the transaction is rolled back. Then the answer from what the
   * claim saw, or null if the key must take the callback's path.
   */
  private <T> Execution<T> sentWithClaim(Binds binds, Query[] statements) {
    for (boolean afterPrelude = prefaced; ; afterPrelude = true) {
      Sql claimString = signal(false, afterPrelude);
      try {
        return context.ownedOnceByIdem(tx -> { // the statements are the caller's, but no code of theirs runs
          send(prepared(tx.connection(), claimString, binds, statements, "commit"));
          return new Execution.Applied<>(null);
        });
      } catch (Repeat repeat) {
        if (!prefacedFrom(repeat, afterPrelude)) {
          return repeat.completedAt != null ? new Execution.Replayed<>(null, repeat.completedAt, repeat.age) : null;
        }
      }
    }
  }

  /**
   * MariaDB's statements form, one round trip for a new key: {@link MariaDbClaimSql#compoundClaim}
   * with the statements and {@code COMMIT} in one compound statement on a connection in
   * auto-commit, which begins its own transaction and rolls it back whole at any failure. A key
   * that has a row gets it back from the same statement (nothing written, the statements not run),
   * and is answered from a completed row within its window, as the read first answers. A wait
   * on another copy's claim past the bound is {@link Busy}. Null if the key must take the
   * callback's path: its row could not answer, the session has a max_statement_time, a statement
   * is one MariaDB allows in no compound statement, or the pool's connection is not in auto-commit.
   */
  private <T> Execution<T> sentInCompound(Binds binds, Codec<T> codec, Query[] statements, long started) {
    try {
      return context.ownStatement(c -> {
        // rendered and bound before anything is sent: a statement jOOQ refuses sends nothing
        try (Pipelined string = prepared(c, compoundClaim, binds, statements, MariaDbClaimSql.COMPOUND_TAIL)) {
          java.sql.ResultSet rs = string.sendForFirstResult();
          if (rs == null || !MariaDbClaimSql.KEY_ROW.equalsIgnoreCase(rs.getMetaData().getColumnLabel(1))) {
            return new Execution.Applied<>(null); // claimed, the statements ran, committed
          }
          // the key has a row: nothing written, the statements not sent
          ClaimRow seen = ClaimRow.from(rs, started, true);
          if (seen != null && MariaDbClaimSql.READ_UNCOMMITTED.equals(rs.getString(10))) {
            seen = ClaimTable.committedRow(c, table.read, binds, started, true); // perhaps another copy's claim, not committed
          }
          if (seen != null && seen.completed() && !seen.pastWindow()) {
            binds.answered(seen, System.nanoTime());
            return answer(seen, binds, codec);
          }
          return null;
        } catch (SQLException e) {
          String stop = MariaDbClaimSql.compoundStop(e);
          ended(c, e);
          if (MariaDbClaimSql.KEY_BUSY.equals(stop)) {
            throw new Busy(retryAfter);
          }
          if (MariaDbClaimSql.TIMED_SESSION.equals(stop)) {
            timedSessions = true;
            return null;
          }
          if (e.getErrorCode() == MariaDbClaimSql.NOT_IN_COMPOUND) {
            return null; // refused as the statement was parsed, before anything ran: as a callback
          }
          throw e; // rolled back whole: the statements' failure, or the connection's
        }
      });
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /**
   * After a compound statement that failed (and rolled its transaction back): a {@code ROLLBACK}
   * of nothing, whose answer tells Connector/J the transaction is over. The driver keeps the status
   * the server sent while the statement ran, in a transaction, until an answer without an error
   * (the next user of the connection, idem's own check among them, would see a transaction open).
   * Its own failure is attached to {@code failure}.
   */
  private static void ended(Connection c, SQLException failure) {
    try (java.sql.Statement st = c.createStatement()) {
      st.execute("rollback");
    } catch (SQLException e) {
      failure.addSuppressed(e);
    }
  }

  /** {@link #claimSignal}'s claim string: in the caller's transaction or not, after the prelude or not. */
  private Sql signal(boolean joined, boolean afterPrelude) {
    return claimSignal[(joined ? 2 : 0) + (afterPrelude ? 1 : 0)];
  }

  /**
   * True if {@code repeat} is a claim sent without the prelude that stopped, having written
   * nothing, because the session has a statement_timeout: the claim is to be sent again after the
   * prelude, as this guard's claims are from now on.
   */
  private boolean prefacedFrom(Repeat repeat, boolean afterPrelude) {
    if (!repeat.needsPreface || afterPrelude) {
      return false;
    }
    prefaced = true;
    return true;
  }

  /**
   * A call in the caller's transaction, under a savepoint: statements sent with the claim, or the
   * claim in a round trip of its own and then the callback. Whatever fails rolls back to the
   * savepoint, so the caller's transaction stays usable and the key free.
   */
  private <T, X extends Exception> Execution<T> joined(Tx tx, Binds binds, Codec<T> codec, TxCallback<T, X> effect,
      Query[] statements, long started) throws X {
    int[] depth = JOINED_DEPTH.get();
    depth[0]++;
    try {
      return joinedAtDepth(tx, binds, codec, effect, statements, started);
    } finally {
      depth[0]--;
    }
  }

  private <T, X extends Exception> Execution<T> joinedAtDepth(Tx tx, Binds binds, Codec<T> codec, TxCallback<T, X> effect,
      Query[] statements, long started) throws X {
    Connection c = tx.connection();
    Driver.refuseUnjoinable(c, name + " " + binds.key);
    if (statements != null && claimSignal != null) {
      for (boolean afterPrelude = prefaced; ; afterPrelude = true) {
        // Rendered and bound first: a statement refused here sent nothing, not even the savepoint,
        // so there is nothing to roll back to (and an outer call's savepoint of that name must not be).
        Pipelined string = prepared(c, signal(true, afterPrelude), binds, statements, ClaimTable.RELEASE);
        try {
          send(string);
          return new Execution.Applied<>(null);
        } catch (Repeat repeat) {
          rollbackToSavepoint(c, binds.key);
          if (prefacedFrom(repeat, afterPrelude)) {
            continue;
          }
          if (repeat.completedAt != null) {
            return new Execution.Replayed<>(null, repeat.completedAt, repeat.age);
          }
        } catch (Throwable t) {
          undo(c, binds.key, t);
          throw t;
        }
        break;
      }
    }
    java.util.List<Pipelined> ready = null;
    if (statements != null && claimSignal != null) {
      effect = sent(statements); // PostgreSQL, a key its one-trip path could not answer: rendered and bound above
    } else if (statements != null) {
      // MariaDB (statements run after the claim): rendered and bound first, as on PostgreSQL's
      // one-trip path, so a statement refused here sent nothing, not even the savepoint (whose
      // rollback would take an outer call's of that name)
      ready = prepareEach(c, statements);
      java.util.List<Pipelined> prepared = ready;
      effect = t -> {
        sendEach(prepared);
        return null;
      };
    }
    try {
      return claimThenApply(tx, binds, codec, effect, started, true);
    } catch (Throwable t) {
      undo(c, binds.key, t);
      throw t;
    } finally {
      if (ready != null) {
        ready.forEach(Pipelined::close);
      }
    }
  }

  /** Each statement on its own, rendered and bound on {@code c}, nothing sent. */
  private java.util.List<Pipelined> prepareEach(Connection c, Query[] statements) {
    try {
      return Pipelined.prepareEach(c, context.dsl(), statements);
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /** Runs statements {@link #prepareEach} made, in order; the first that fails ends it. */
  private void sendEach(java.util.List<Pipelined> prepared) {
    try {
      for (Pipelined p : prepared) {
        p.send();
      }
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /**
   * The claim protocol on {@code tx}: claim or read; a new claim runs the effect; a row of another
   * copy is answered (replay, in flight, reuse) unless it is past its window, then it is claimed
   * again. {@code joined}: the caller's transaction; a savepoint is set with the claim.
   */
  private <T, X extends Exception> Execution<T> claimThenApply(Tx tx, Binds binds, Codec<T> codec,
      TxCallback<T, X> effect, long started, boolean joined) throws X {
    Connection c = tx.connection();
    binds.answered(null, 0);
    binds.claimStamp = null;
    ClaimRow row = claim(c, joined ? savepoint().claimJoined() : claim, joined ? 1 : 0, binds, started, joined);
    for (int round = 1; ; round++) {
      if (row == null) {
        // The claim inserted nothing, and the row it met is gone since (expired and deleted
        // meanwhile): claim again.
        row = claim(c, claim, 0, binds, started, joined);
      } else if (row.claimed()) {
        return applied(row, tx, binds, codec, effect, joined);
      } else if (row.expirable()) {
        if (reclaimed(c, binds, joined)) {
          return applyLocal(tx, binds, codec, effect, joined);
        }
        row = readOn(c, table.readLatest, binds, started); // another copy re-claimed it first
      } else {
        Execution<T> repeat = answer(row, binds, codec);
        if (joined) {
          run(c, savepoint().release(), binds);
        } else {
          binds.answered(row, System.nanoTime());
        }
        return repeat;
      }
      if (round >= MAX_CLAIM_ROUNDS) {
        throw new DataAccessException(name + ": could not claim or read key " + binds.key + " in " + MAX_CLAIM_ROUNDS
            + " rounds: its row kept changing");
      }
    }
  }

  /**
   * {@link #applyLocal} on the row this call's claim inserted; in a transaction of its own, the row
   * as a repeat would then read it is kept in {@code binds} (a repeat on this guard is answered
   * from it once committed).
   */
  private <T, X extends Exception> Execution<T> applied(ClaimRow claimed, Tx tx, Binds binds, Codec<T> codec,
      TxCallback<T, X> effect, boolean joined) throws X {
    long claimedAt = System.nanoTime(); // the row's age is counted from its claim, as the database counts it
    binds.result = null;
    // MariaDB: the claim's stamp, which the row must still have when idem commits (requireClaimsKept)
    binds.claimStamp = table.mariadb != null && !joined && table.created != null ? claimed.completedAt() : null;
    Execution<T> outcome = applyLocal(tx, binds, codec, effect, joined);
    if (!joined && claimed.completedAt() != null && window != null) {
      binds.answered(ClaimRow.applied(claimed.completedAt(),
          binds.fingerprint == null ? null : binds.fingerprintBytes(), binds.result, window.length()), claimedAt);
    }
    return outcome;
  }

  private <T, X extends Exception> Execution<T> applyLocal(Tx tx, Binds binds, Codec<T> codec, TxCallback<T, X> effect,
      boolean joined) throws X {
    T value = RunningKeys.run(context, table.layout, binds.key, effect, tx);
    if (Driver.aborted(tx.connection())) {
      // The effect caught an SQL error and returned: PostgreSQL aborted the transaction, and a
      // commit would roll it back. Never report Applied for work that is gone.
      throw new DataAccessException(name + ", key " + binds.key + ": " + OwnTransaction.ABORTED_BY_CAUGHT_ERROR
          + (joined ? "; its part is rolled back, your transaction goes on" : "; nothing of it is committed"));
    }
    byte[] bytes = codec.storesNothing() ? null : encode(binds.key, codec, value, "the effect was rolled back");
    if (!joined && binds.claimStamp != null) {
      // MariaDB: the same, for a transaction the server rolled back under the effect: the claim's
      // row, the result and COMMIT in one round trip (a joined call's savepoint, released below,
      // shows it there)
      requireNotRolledBack(tx.connection());
      context.beforeCommit(tx);
      keptAndCommit(tx.connection(), bytes != null ? table.mariadb.keptStoreAndCommit : table.mariadb.keptAndCommit,
          binds.result(bytes));
      context.committed(tx);
    } else if (bytes != null) {
      // Owned: the result and COMMIT in one round trip (idem's commit then finds nothing to do).
      if (!joined) {
        context.beforeCommit(tx);
      }
      run(tx.connection(), joined ? savepoint().storeAndRelease() : storeAndCommit, binds.result(bytes));
      if (!joined) {
        context.committed(tx);
      }
    } else if (joined) {
      run(tx.connection(), savepoint().release(), binds);
    }
    return new Execution.Applied<>(value);
  }

  // ---------------------------------------------------------------------------------------------
  // Answers

  /**
   * The answer to a call that found the key's row within its window: the replay, {@link
   * KeyReuseException}, or (an external claim in flight, whose call may or may not have gone out)
   * {@link Busy}.
   */
  <T> Execution<T> answer(ClaimRow row, Binds binds, Codec<T> codec) {
    checkFingerprint(row, binds);
    if (row.completed()) {
      return replay(binds.key, codec, row);
    }
    throw new Busy(row.leaseLive() ? row.leaseLeft() : retryAfter);
  }

  /**
   * Refuses another request under a key the row still holds for its intent. A row past its window
   * belongs to no intent a caller can reuse: what keeps it (an external attempt whose lease is still
   * live) makes the caller wait, and once the lease ends the key is claimed as a new intent.
   */
  void checkFingerprint(ClaimRow row, Binds binds) {
    if (binds.fingerprint != null && !row.pastWindow() && !binds.sameFingerprint(row.fingerprint())) {
      events.fingerprintMismatch(binds.key);
      throw new KeyReuseException(binds.key, HexFormat.of().formatHex(row.fingerprint()), binds.fingerprint);
    }
  }

  public <T> Execution<T> replay(IdempotencyKey key, Codec<T> codec, ClaimRow row) {
    T value;
    try {
      value = codec.storesNothing() ? null : codec.decode(row.result());
    } catch (Exception e) {
      throw new CodecException("the stored result for key " + key + " could not be decoded by " + codec + " ("
          + e + "); the key stays completed and its effect does not run again", e);
    }
    return new Execution.Replayed<>(value, row.completedAt(), row.age());
  }

  public static <T> byte[] encode(IdempotencyKey key, Codec<T> codec, T value, String consequence) {
    try {
      return codec.encode(value);
    } catch (Exception e) {
      throw new CodecException("the result for key " + key + " could not be encoded by " + codec + " ("
          + e + "), so it could not be stored for replay; " + consequence + " and nothing was stored", e);
    }
  }

  /** Emits the event of an outcome decided (and, when owned, committed). */
  public <T> Execution<T> reported(IdempotencyKey key, Execution<T> outcome) {
    if (outcome instanceof Execution.Replayed<T> r) {
      events.replayed(key, r.age(), window);
    } else if (outcome instanceof Execution.Applied<T>) {
      events.applied(key);
    }
    return outcome;
  }

  <T> Execution.InFlight<T> inFlight(IdempotencyKey key, Duration after) {
    return new Execution.InFlight<>(key.toString(), inFlightRetryAfter(key, after));
  }

  /**
   * The retry-after of an in-flight answer ({@code after}, a live lease's time left, or the guard's
   * own if there is none), its event emitted.
   */
  Duration inFlightRetryAfter(IdempotencyKey key, Duration after) {
    Duration wait = after == null || after.compareTo(Duration.ZERO) <= 0 ? retryAfter : after;
    events.inFlight(key, wait);
    return wait;
  }

  // ---------------------------------------------------------------------------------------------
  // Statements

  /** The key's row as a new auto-commit statement sees it, or null; read again under the retry budget. */
  ClaimRow read(Binds binds, long started) {
    return context.autoCommit(name, c -> ClaimTable.committedRow(c, table.read, binds, started, context.mariadb()));
  }

  /** The key's row as {@code read} (a read of the table, which waits on nothing) sees it on {@code c}, or null. */
  private ClaimRow readOn(Connection c, Sql read, Binds binds, long started) {
    try {
      return ClaimTable.row(c, read, 0, binds, started);
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /** Re-claims a row past its window; false if another copy re-claimed it first. */
  private boolean reclaimed(Connection c, Binds binds, boolean joined) {
    try {
      if (table.mariadb == null) {
        return ClaimTable.single(c, reclaim, 0, binds) != null;
      }
      java.time.Instant stamp = reclaimStamp(c, binds);
      // the commit finds the row by it (requireClaimsKept), as a claim's that inserted it
      binds.claimStamp = joined ? null : stamp;
      return stamp != null;
    } catch (SQLException e) {
      throw claimFailed(e);
    }
  }

  /** MariaDB: re-claims the key's row past its window; the stamp it now has, or null if another copy re-claimed it first. */
  java.time.Instant reclaimStamp(Connection c, Binds binds) throws SQLException {
    return reclaim.run(c, binds, 0, rs -> rs.next() ? DbTime.read(rs, 1, true).toInstant() : null);
  }

  /**
   * A claim statement: the row it claimed, else the key's row as a statement after it sees it
   * ({@link ClaimTable#restoreAndRead}), or null if there is none. See {@link #claimFailed} for
   * what the claim's failure means. In a transaction of idem's own on PostgreSQL, a claim that
   * inserted nothing has written nothing, so its transaction is rolled back with the read, in the
   * same round trip ({@link #readAndEnd}): a repeat answered from the row then costs two round
   * trips, not three (the empty transaction's commit). What follows a read that cannot answer (a
   * re-claim, a claim again) begins the next transaction, which holds the effect.
   */
  private ClaimRow claim(Connection c, Sql sql, int index, Binds binds, long started, boolean joined) {
    ClaimRow claimed;
    try {
      claimed = ClaimTable.row(c, sql, index, binds, started);
    } catch (SQLException e) {
      throw claimFailed(e);
    }
    if (claimed != null || table.restoreAndRead == null) {
      return claimed;
    }
    return readOn(c, joined || readAndEnd == null ? table.restoreAndRead : readAndEnd, binds, started);
  }

  /**
   * What the failure of a callback's claim, one statement alone in its round trip, means: as
   * {@link #classified}, and a cancelled statement (57014) is a wait past the bound too. PostgreSQL
   * arms statement_timeout when the statement starts, so the claim cannot lift it for its own wait,
   * and a pool's statement_timeout shorter than inFlightWait ends the wait first. Nothing of the
   * caller's runs in the statement, so what was cancelled is the claim, which wrote nothing.
   */
  RuntimeException claimFailed(SQLException e) {
    return SqlStates.is(e, SqlStates.QUERY_CANCELED) ? new Busy(retryAfter) : classified(e);
  }

  /**
   * {@code claim}, {@code statements} (or none) and {@code tail}, rendered and bound, not sent: a
   * statement jOOQ cannot render or bind is an {@link IllegalArgumentException} here, before any SQL.
   */
  private Pipelined prepared(Connection c, Sql claim, Binds binds, Query[] statements, String tail) {
    try {
      return Pipelined.prepare(c, context.dsl(), claim.text(), claim.values(binds),
          statements == null ? new Query[0] : statements, tail);
    } catch (SQLException e) {
      throw failed(e);
    }
  }

  /**
   * Sends {@code string} and closes it. The key's row found is {@link Repeat}; a wait on another
   * copy's claim past the bound is {@link Busy}; anything else is thrown (a serialization failure
   * for the retry budget, a statement's failure for the caller).
   */
  private Void send(Pipelined string) {
    try (string) {
      string.send();
      return null;
    } catch (SQLException e) {
      throw classified(e);
    }
  }

  /**
   * What a claim statement's failure means: idem's signal (the key has a row) is {@link Repeat}; a
   * wait on the key table past the bound, another copy in flight, is {@link Busy}; anything else
   * is the failure.
   */
  private RuntimeException classified(SQLException e) {
    Repeat repeat = Repeat.of(e);
    if (repeat != null) {
      return repeat;
    }
    if (SqlStates.isLockTimeoutOn(e, table.layout.primaryKey()) || SqlStates.isLockTimeoutOn(e, table.layout.table())
        || SqlStates.isLockWaitTimeout(e)) {
      return new Busy(retryAfter);
    }
    return failed(e);
  }

  /** The statements as a callback, for a call whose claim took a round trip of its own. */
  private <T, X extends Exception> TxCallback<T, X> sent(Query[] statements) {
    return tx -> {
      try {
        Pipelined.run(tx.connection(), context.dsl(), statements);
      } catch (SQLException e) {
        throw failed(e);
      }
      return null;
    };
  }

  private void run(Connection c, Sql sql, Binds binds) {
    try {
      ClaimTable.run(c, sql, binds);
    } catch (SQLException e) {
      throw failed(Driver.orRolledBack(c, e));
    }
  }

  /**
   * MariaDB: refuses to go on in a transaction a call in it saw the server roll back ({@link
   * Driver#rolledBack}: a nested call's savepoint gone, whose error the effect caught).
   */
  void requireNotRolledBack(Connection c) {
    SQLException rolledBack = Driver.rolledBackBy(c);
    if (rolledBack != null) {
      throw lost(rolledBack);
    }
  }

  /** The failure of a call whose transaction the server rolled back under it ({@link Driver#rolledBack}). */
  DataAccessException lost(SQLException rolledBack) {
    return new DataAccessException(name + ": " + rolledBack.getMessage() + "; nothing of it is committed", rolledBack);
  }

  /** Runs {@link MariaDbClaimSql#keptAndCommit} (or its storing form): its signal is the transaction rolled back under the effect. */
  private void keptAndCommit(Connection c, Sql sql, Binds binds) {
    try {
      ClaimTable.run(c, sql, binds);
    } catch (SQLException e) {
      if (e.getMessage() != null && e.getMessage().contains(MariaDbClaimSql.CLAIM_GONE)) {
        throw lost(Driver.rolledBack(c, "the claim of key " + binds.key + " is gone", e));
      }
      throw failed(e);
    }
  }

  /**
   * MariaDB, in a transaction of idem's own, before it commits: refuses to commit if the server
   * rolled the transaction back under the effect. A deadlock rolls back InnoDB's whole transaction,
   * the claims with it, and the statements after it run in a new one: an effect that caught the
   * deadlock's error and went on would have that committed as if its keys were claimed (PostgreSQL
   * aborts the transaction instead, which {@link Driver#aborted} sees). One round trip: every one of
   * {@code keys} (of {@code scope}) must have its row with the stamp its claim gave it ({@code
   * stamps}, in the same order); another copy's claim since has a stamp of its own.
   *
   * @throws DataAccessException with SQLSTATE 40001 underneath (the retry budget runs it again)
   */
  void requireClaimsKept(Connection c, String scope, java.util.List<String> keys, java.util.List<java.time.Instant> stamps) {
    requireNotRolledBack(c);
    long kept;
    try (java.sql.PreparedStatement ps = c.prepareStatement(table.mariadb.claimsKept(keys.size()))) {
      ps.setString(1, scope);
      for (int i = 0; i < keys.size(); i++) {
        ps.setString(2 * i + 2, keys.get(i));
        ps.setObject(2 * i + 3, DbTime.utc(stamps.get(i)));
      }
      try (java.sql.ResultSet rs = ps.executeQuery()) {
        rs.next();
        kept = rs.getLong(1);
      }
    } catch (SQLException e) {
      throw failed(e);
    }
    if (kept != keys.size()) {
      throw lost(Driver.rolledBack(c, "the claims of " + (keys.size() - kept) + " of its " + keys.size()
          + " keys are gone", new SQLException("an effect caught the database's error and went on")));
    }
  }

  /** After a joined call failed: back to before its claim; a failure to get there is attached. */
  private void undo(Connection c, IdempotencyKey key, Throwable failure) {
    try {
      rollbackToSavepoint(c, key);
    } catch (RuntimeException e) {
      failure.addSuppressed(e);
    }
  }

  /** Undoes a joined call's claim; if that fails, the caller's transaction is not usable and says so. */
  private void rollbackToSavepoint(Connection c, IdempotencyKey key) {
    try {
      Driver.savepointCommand(c, savepoint().rollback());
    } catch (SQLException e) {
      throw new DataAccessException(name + ": could not roll back to the savepoint before the claim of key " + key
          + ", so the caller's transaction may hold it or be aborted; roll the transaction back: " + e.getMessage(), e);
    }
  }

  RuntimeException failed(SQLException e) {
    IllegalArgumentException refused = SqlStates.refusedKey(e);
    return refused != null ? refused : new DataAccessException(name + ": " + e.getMessage(), e);
  }

  // ---------------------------------------------------------------------------------------------
  // Expiry

  /**
   * Deletes rows past their window (by the database clock) where {@code also} holds, in batches of
   * {@code batchSize}, at most {@code maxBatches} per call.
   */
  public long expire(Condition also, int batchSize, int maxBatches) {
    if (context.partitioned()) {
      return 0; // whole partitions expire (Operations.maintainPartitions); no index would serve a delete
    }
    // the key table's deletes raise the fence floor (the inbox keeps no fences)
    long deleted = Expiry.deleteInBatches(context, table.t, table.expirable.and(also), table.layout.keys() ? table.fence : null,
        batchSize, maxBatches);
    if (deleted > 0) {
      events.expired(deleted);
    }
    return deleted;
  }
}
