package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The claim protocol for a batch of keys of one scope (the inbox's {@code receiveAll}), on the
 * engine's table and statements: every key claimed in one statement, then each claimed key's
 * effect in the same transaction. An effect that throws frees its key and leaves the others'
 * effects and claims: the batch's savepoint takes the run back, and the batch runs again without
 * that key, each effect then under a savepoint of its own, so that a further failure rolls back
 * to its savepoint and its claim is deleted before the end. A key with a row within its window is
 * a repeat and its effect does not run; one past its window is claimed again; one another copy
 * holds longer than the bound is in flight. Not an API.
 *
 * <p>Round trips: in a transaction of idem's own, a batch of new keys costs one for {@code BEGIN}
 * and the claims, its effects' own and the commit: what the same batch costs written by hand (no
 * savepoint: the transaction's start is the batch's, and a claim whose wait ran out, the first
 * statement, or a failed effect rolls the transaction back instead). In the caller's transaction,
 * the claims (with the batch's savepoint), the effects' own, and one to end. After a failed
 * effect, the rollback, the claims again, one per claimed key besides its effect's (the savepoint
 * that ends one effect and begins the next go together) and the end. A batch of repeats costs the
 * claim and the commit (in the caller's transaction, the claim and the end), and writes nothing.
 * On MariaDB every savepoint command is a round trip of its own, and a claim that did not insert
 * every key reads the others in one more.
 */
public final class BatchClaims {
  /** What became of one key of the batch. */
  public enum Fate {
    APPLIED, REPEAT, FAILED, IN_FLIGHT
  }

  /**
   * One key's outcome.
   *
   * @param age for a repeat, how long ago the key was first received; else null
   * @param error for a failed effect, what it threw; else null
   */
  public record Outcome(Fate fate, Duration age, Exception error) {
    static final Outcome APPLIED = new Outcome(Fate.APPLIED, null, null);
  }

  /** The effect of the key at {@code index} of the batch, in the batch's transaction. */
  @FunctionalInterface
  public interface Effect {
    void apply(Tx tx, int index) throws Exception;
  }

  /**
   * The savepoints of one batch call: the whole call (what a joined call that fails rolls back to,
   * so the caller's transaction goes on), one claim statement (what a wait past the bound rolls
   * back to, having written nothing), and one key's effect (what its failure rolls back to).
   * PostgreSQL stacks savepoints of one name; MariaDB (InnoDB) replaces one of the same name, so
   * there a batch received inside another batch's effect names its own by its depth ({@link #at}).
   */
  private record Savepoints(String batch, String round, String message) {
    static final Savepoints OUTERMOST = new Savepoints("idem_batch", "idem_claim_round", "idem_message");

    /** The names of a batch at {@code depth} (1: the outermost) on this thread. */
    static Savepoints at(int depth) {
      return depth <= 1 ? OUTERMOST
          : new Savepoints(OUTERMOST.batch + "_" + depth, OUTERMOST.round + "_" + depth, OUTERMOST.message + "_" + depth);
    }

    String nextMessage() {
      return "release savepoint " + message + ";\nsavepoint " + message;
    }

    String nextMessageAfterFailure() {
      return "rollback to savepoint " + message + ";\n" + nextMessage();
    }

    String roundBack() {
      return "rollback to savepoint " + round + ";\nrelease savepoint " + round;
    }

    String batchBack() {
      return "rollback to savepoint " + batch + ";\nrelease savepoint " + batch;
    }

    String batchEnd() {
      return "release savepoint " + batch;
    }
  }

  /** How many batch calls run on this thread, the innermost last (see {@link Savepoints}). */
  private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

  /** A batch claim that claimed every key: one row for all (the statement sends none for a key it claimed). */
  private static final ClaimRow CLAIMED = new ClaimRow(true, 1, null, null, null, null, null, null, false, false, null);

  private final Claims claims;
  /** MariaDB's statements; null on PostgreSQL. */
  private final MariaDbClaimSql mariadb;
  /** [savepoint batch, savepoint round, claim batch, release round]: the rows at 2. */
  private final Sql claimFirst;
  /** [savepoint round, claim batch, release round]: the rows at 1; and its at-once form. */
  private final Sql claimAgain;
  private final Sql claimAtOnce;
  private final Sql reclaim;
  private final Sql reclaimAtOnce;
  /** [unclaim, release batch], and after a failed last effect [rollback to it, unclaim, release batch]. */
  private final Sql endUnclaiming;
  private final Sql endUnclaimingAfterFailure;

  BatchClaims(Claims claims) {
    this.claims = claims;
    ClaimTable table = claims.table;
    this.mariadb = table.mariadb;
    DSLContext dsl = claims.context.dsl();
    if (mariadb != null) {
      // MariaDB: statements per batch size (Run.claimRows), the commands sent one by one
      this.claimFirst = this.claimAgain = this.claimAtOnce = this.reclaim = this.reclaimAtOnce = null;
      this.endUnclaiming = this.endUnclaimingAfterFailure = null;
      return;
    }
    Savepoints names = Savepoints.OUTERMOST; // PostgreSQL stacks savepoints of one name
    Sql savepointRound = command(dsl, "savepoint " + names.round());
    Sql releaseRound = command(dsl, "release savepoint " + names.round());
    this.claimFirst = Sql.join(command(dsl, "savepoint " + names.batch()), savepointRound, table.claimBatch, releaseRound);
    this.claimAgain = Sql.join(savepointRound, table.claimBatch, releaseRound);
    this.claimAtOnce = Sql.join(savepointRound, table.claimBatchAtOnce, releaseRound);
    this.reclaim = Sql.join(savepointRound, table.reclaimBatch, releaseRound);
    this.reclaimAtOnce = Sql.join(savepointRound, table.reclaimBatchAtOnce, releaseRound);
    this.endUnclaiming = Sql.join(table.unclaimBatch, command(dsl, names.batchEnd()));
    this.endUnclaimingAfterFailure = Sql.join(command(dsl, "rollback to savepoint " + names.message()), table.unclaimBatch,
        command(dsl, names.batchEnd()));
  }

  private static Sql command(DSLContext dsl, String sql) {
    return Sql.of(dsl, DSL.query(sql));
  }

  /**
   * Runs {@code effect} once for each of {@code keys} (distinct) of {@code scope} not received
   * before ({@code ids[i]}: the key of {@code scope} and {@code keys[i]}): in the transaction open
   * on this thread if there is one, under a savepoint, else in a transaction of its own under the
   * retry budget. Reports the events once the outcome is decided
   * (and, when the transaction is idem's, committed).
   *
   * @return the outcome of each key, in the order of {@code keys}
   */
  public Outcome[] execute(String scope, String[] keys, IdempotencyKey[] ids, Effect effect) {
    for (IdempotencyKey id : ids) {
      RunningKeys.refuseNested(claims.context, claims.table.layout, id);
    }
    long started = System.nanoTime();
    Tx open = claims.context.current();
    Outcome[] outcomes;
    int[] depth = DEPTH.get();
    depth[0]++;
    try {
      if (open != null) {
        Driver.refuseUnjoinable(open.connection(), claims.name + " batch of " + keys.length + " messages");
        outcomes = joined(open, scope, keys, ids, effect, started);
      } else {
        boolean[] ran = new boolean[1]; // whether an effect ran in the run that failed
        outcomes = claims.context.owned(tx -> {
          ran[0] = false;
          return attempt(tx, true, scope, keys, ids, effect, started, ran, new Run[1]);
        }, () -> ran[0]);
      }
    } finally {
      depth[0]--;
    }
    for (int i = 0; i < outcomes.length; i++) {
      Outcome o = outcomes[i];
      switch (o.fate()) {
        case APPLIED -> claims.events.applied(ids[i]);
        case REPEAT -> claims.events.replayed(ids[i], o.age(), claims.window);
        case IN_FLIGHT -> claims.events.inFlight(ids[i], claims.retryAfter);
        case FAILED -> { } // the effect's failure is the caller's to report
      }
    }
    return outcomes;
  }

  /** In the caller's transaction: whatever fails undoes all of the call (claims and effects), and the caller's transaction goes on. */
  private Outcome[] joined(Tx tx, String scope, String[] keys, IdempotencyKey[] ids, Effect effect, long started) {
    boolean[] ran = new boolean[1];
    Run[] current = new Run[1];
    try {
      return attempt(tx, false, scope, keys, ids, effect, started, ran, current);
    } catch (Throwable t) {
      if (current[0].savepointSent) {
        try {
          Driver.savepointCommand(tx.connection(), current[0].names.batchBack());
        } catch (SQLException | RuntimeException e) {
          t.addSuppressed(new DataAccessException(claims.name + ": could not roll back to the savepoint before the batch's"
              + " claims, so your transaction may hold them or be aborted; roll it back: " + e.getMessage(), e));
        }
      }
      throw t;
    }
  }

  /**
   * The batch on {@code tx}: first every claimed key's effect with no savepoint of its own (a
   * savepoint is a round trip per message, a third of a new message's cost); if one fails, the
   * batch's savepoint takes back every claim and effect of that run, and the batch runs again
   * without the failed key (its id free, its failure reported), each effect then under a savepoint
   * of its own. So an effect runs twice in one call when a later one fails, its first run's writes
   * rolled back: what the inbox already allows a transaction that rolls back. {@code current}
   * holds the run in progress, whose savepoint a failure of a joined call rolls back to. {@code
   * own}: {@code tx} is idem's own transaction, with nothing in it yet, so the first run sets no
   * savepoint and rolls the transaction back where it would roll back to one.
   */
  private Outcome[] attempt(Tx tx, boolean own, String scope, String[] keys, IdempotencyKey[] ids, Effect effect, long started,
      boolean[] ran, Run[] current) {
    Run atOnce = current[0] = new Run(tx, own, own, scope, keys, ids, started, null);
    Outcome[] outcomes = atOnce.all(effect, ran);
    if (outcomes != null) {
      return outcomes;
    }
    atOnce.backToBatchStart();
    current[0] = new Run(tx, false, own, scope, keys, ids, started, atOnce);
    return current[0].all(effect, ran);
  }

  /** One run of a batch on one transaction. */
  private final class Run {
    final Tx tx;
    final Connection c;
    /** This batch's savepoints: on MariaDB named by its depth on this thread. */
    final Savepoints names = mariadb != null ? Savepoints.at(DEPTH.get()[0]) : Savepoints.OUTERMOST;
    /**
     * The first run in a transaction of idem's own: its start is the batch's, so the batch's
     * savepoint, and the first claim's, are not set (a round trip and a subtransaction each, for
     * nothing): what would roll back to them rolls the transaction back.
     */
    final boolean own;
    /** The transaction is idem's own (in any run, the first or the one again). */
    final boolean idems;
    final String scope;
    final String[] keys;
    final IdempotencyKey[] ids;
    final long started;
    final Outcome[] outcomes;
    final boolean[] claimed;
    /** MariaDB: the time each key's claim (or re-claim) stamped its row with; null where not claimed here. */
    final Instant[] stamps;
    /** Whether the batch's savepoint may be set: its statement was sent. */
    boolean savepointSent;
    /** Null for the first run, with no savepoint per effect; else the run whose failed key this one leaves out. */
    final Run after;
    /** In the first run, the key whose effect failed, and what it threw. */
    int failedAt = -1;
    Exception failure;

    Run(Tx tx, boolean own, boolean idems, String scope, String[] keys, IdempotencyKey[] ids, long started, Run after) {
      this.tx = tx;
      this.c = tx.connection();
      this.own = own;
      this.idems = idems;
      this.scope = scope;
      this.keys = keys;
      this.ids = ids;
      this.started = started;
      this.outcomes = new Outcome[keys.length];
      this.claimed = new boolean[keys.length];
      this.stamps = new Instant[keys.length];
      this.after = after;
      if (after != null) {
        outcomes[after.failedAt] = new Outcome(Fate.FAILED, null, after.failure);
      }
    }

    /** Every key's outcome; null if this is the first run and an effect failed ({@link #failedAt}). */
    Outcome[] all(Effect effect, boolean[] ran) {
      claim();
      Outcome[] all = after == null ? allAtOnce(effect, ran) : allUnderSavepoints(effect, ran);
      if (all != null && mariadb != null && idems) {
        requireClaimsKept();
      }
      return all;
    }

    /** MariaDB, idem's own transaction, before it commits: the applied keys' claims are all there ({@link Claims#requireClaimsKept}). */
    private void requireClaimsKept() {
      List<String> applied = new ArrayList<>();
      List<Instant> appliedStamps = new ArrayList<>();
      for (int i = 0; i < keys.length; i++) {
        if (outcomes[i] == Outcome.APPLIED) {
          applied.add(keys[i]);
          appliedStamps.add(stamps[i]);
        }
      }
      if (applied.isEmpty()) {
        claims.requireNotRolledBack(c);
      } else {
        claims.requireClaimsKept(c, scope, applied, appliedStamps);
      }
    }

    private Outcome[] allAtOnce(Effect effect, boolean[] ran) {
      for (int i = 0; i < keys.length; i++) {
        if (!claimed[i]) {
          continue;
        }
        ran[0] = true;
        Exception error = apply(effect, i);
        if (error != null) {
          failedAt = i;
          failure = error;
          return null;
        }
        outcomes[i] = Outcome.APPLIED;
      }
      if (!own) {
        command(names.batchEnd());
      }
      return outcomes;
    }

    /** Rolls back every claim and effect of this run: to the batch's savepoint, or, {@link #own}, the transaction. */
    void backToBatchStart() {
      if (own) {
        rollback();
      } else {
        command(names.batchBack());
      }
    }

    private void rollback() {
      try {
        c.rollback();
      } catch (SQLException e) {
        throw claims.failed(e);
      }
    }

    private Outcome[] allUnderSavepoints(Effect effect, boolean[] ran) {
      List<String> failed = new ArrayList<>();
      boolean first = true;
      boolean lastFailed = false;
      for (int i = 0; i < keys.length; i++) {
        if (!claimed[i]) {
          continue;
        }
        // one round trip ends the previous effect's savepoint (rolled back if it failed) and sets this one's
        command(first ? "savepoint " + names.message() : lastFailed ? names.nextMessageAfterFailure() : names.nextMessage());
        first = false;
        ran[0] = true;
        Exception error = apply(effect, i);
        lastFailed = error != null;
        if (lastFailed) {
          failed.add(keys[i]);
          outcomes[i] = new Outcome(Fate.FAILED, null, error);
        } else {
          outcomes[i] = Outcome.APPLIED;
        }
      }
      if (failed.isEmpty()) {
        if (savepointSent) { // a run again with nothing left to claim (only the failed key was new) set none
          command(names.batchEnd());
        }
      } else if (mariadb != null) {
        unclaimOnMariaDb(failed, lastFailed);
      } else {
        try (PreparedStatement ps = prepare(lastFailed ? endUnclaimingAfterFailure : endUnclaiming, failed.toArray(new String[0]))) {
          ps.execute();
        } catch (SQLException e) {
          throw claims.failed(e);
        }
      }
      return outcomes;
    }

    /** The effect of the key at {@code i}; what it threw, or null. */
    private Exception apply(Effect effect, int i) {
      try {
        RunningKeys.run(claims.context, claims.table.layout, ids[i], t -> {
          effect.apply(t, i);
          return null;
        }, tx);
      } catch (Exception e) {
        if (mariadb != null && SqlStates.isMariaDbDeadlock(e)) {
          // InnoDB rolled back the whole transaction, every claim and effect before this one with
          // it: the batch cannot go on in it (its savepoints are gone too), only run again
          throw claims.lost(Driver.rolledBack(c, "message " + keys[i] + "'s effect was a deadlock's victim", e));
        }
        return e;
      }
      if (mariadb != null) {
        claims.requireNotRolledBack(c); // a nested call saw the transaction rolled back, and the effect caught it
      }
      if (Driver.aborted(c)) {
        // The effect caught an SQL error and returned: its part can only be rolled back.
        return new DataAccessException(claims.name + ", message " + keys[i] + ": " + OwnTransaction.ABORTED_BY_CAUGHT_ERROR
            + "; its part is rolled back, the rest of the batch goes on");
      }
      return null;
    }

    /**
     * Claims every key, sets the outcome of those that are not this call's to run (repeats, in
     * flight), and marks those that are in {@link #claimed}. The first round claims all keys in one
     * statement, waiting up to the bound for copies in flight elsewhere; once a wait has run out,
     * the keys left are claimed one by one, answering at once, so the call waits about the bound
     * once, not once per key.
     */
    private void claim() {
      List<Integer> pending = new ArrayList<>(keys.length);
      for (int i = 0; i < keys.length; i++) {
        if (outcomes[i] == null) { // not the key a first run left out
          pending.add(i);
        }
      }
      boolean first = true;
      boolean atOnce = false;
      for (int round = 1; !pending.isEmpty(); round++) {
        if (round > Claims.MAX_CLAIM_ROUNDS) {
          throw new DataAccessException(claims.name + ": could not claim or read " + pending.size()
              + " message ids of a batch in " + Claims.MAX_CLAIM_ROUNDS + " rounds: their rows kept changing");
        }
        List<Integer> next = new ArrayList<>();
        if (atOnce) {
          for (int i : pending) {
            step(List.of(i), false, true, next);
          }
        } else if (!step(pending, first, false, next)) {
          atOnce = true;
        }
        first = false;
        pending = next;
      }
    }

    /**
     * One claim statement over the keys at {@code positions}, then the re-claim of those past their
     * window; what neither settles goes to {@code next}. False if a wait ran out: the statement
     * was rolled back, and its keys are in flight ({@code atOnce}) or in {@code next}.
     */
    private boolean step(List<Integer> positions, boolean first, boolean atOnce, List<Integer> next) {
      ClaimRow[] rows;
      try {
        rows = mariadb != null ? claimRowsOnMariaDb(first, atOnce, keysAt(positions))
            : first && own ? claimRows(claims.table.claimBatch, 0, keysAt(positions))
            : claimRows(first ? claimFirst : atOnce ? claimAtOnce : claimAgain, first ? 2 : 1, keysAt(positions));
      } catch (Busy waitedOut) {
        return waitedOut(positions, first, atOnce, next);
      }
      List<Integer> expired = new ArrayList<>();
      for (int j = 0; j < rows.length; j++) {
        ClaimRow row = rows[j];
        int i = positions.get(j);
        if (row == null) {
          next.add(i); // the claim waited for another copy's, which committed: read it in a new statement
        } else if (row.claimed()) {
          claimed[i] = true;
          stamps[i] = row.completedAt();
        } else if (row.expirable()) {
          expired.add(i);
        } else {
          outcomes[i] = new Outcome(Fate.REPEAT, row.age(), null);
        }
      }
      if (expired.isEmpty()) {
        return true;
      }
      Map<String, Instant> reclaimed;
      try {
        reclaimed = reclaimed(atOnce ? reclaimAtOnce : reclaim, keysAt(expired));
      } catch (Busy waitedOut) {
        return waitedOut(expired, false, atOnce, next);
      }
      for (int i : expired) {
        if (reclaimed.containsKey(keys[i])) {
          claimed[i] = true;
          stamps[i] = reclaimed.get(keys[i]);
        } else {
          next.add(i); // another copy re-claimed it first: read it in a new statement
        }
      }
      return true;
    }

    private boolean waitedOut(List<Integer> positions, boolean first, boolean atOnce, List<Integer> next) {
      if (first && own) {
        rollback(); // the claim was the transaction's first statement, under no savepoint
      } else {
        command(names.roundBack());
      }
      if (atOnce) {
        for (int i : positions) {
          outcomes[i] = new Outcome(Fate.IN_FLIGHT, null, null);
        }
      } else {
        next.addAll(positions);
      }
      return false;
    }

    private String[] keysAt(List<Integer> positions) {
      String[] out = new String[positions.size()];
      for (int j = 0; j < out.length; j++) {
        out[j] = keys[positions.get(j)];
      }
      return out;
    }

    /**
     * A claim statement's row for each of {@code batch}, in its order (null where it neither claimed
     * nor saw one). The statement sends rows only for the keys it did not claim.
     */
    private ClaimRow[] claimRows(Sql sql, int index, String[] batch) {
      ClaimRow[] rows = new ClaimRow[batch.length];
      boolean[] sent = new boolean[batch.length];
      try (PreparedStatement ps = prepare(sql, batch)) {
        savepointSent |= sql == claimFirst;
        try (ResultSet rs = Sql.resultAt(ps, index)) {
          while (rs.next()) {
            int position = rs.getInt(10);
            if (!rs.wasNull()) { // else the one row of a statement that claimed every key
              sent[position - 1] = true;
              rows[position - 1] = ClaimRow.at(rs, started, false);
            }
          }
        }
      } catch (SQLException e) {
        throw claims.claimFailed(e);
      }
      for (int j = 0; j < rows.length; j++) {
        if (!sent[j]) {
          rows[j] = CLAIMED;
        }
      }
      return rows;
    }

    /**
     * MariaDB's batch claim: the insert of every key of {@code batch} (in key order) under the
     * bound, or answering at once, then a locking read of the rows it did not insert, each in its
     * own round trip, between the round's savepoint and its release as on PostgreSQL.
     */
    private ClaimRow[] claimRowsOnMariaDb(boolean first, boolean atOnce, String[] batch) {
      ClaimRow[] rows = new ClaimRow[batch.length];
      Integer[] order = new Integer[batch.length];
      for (int j = 0; j < order.length; j++) {
        order[j] = j;
      }
      Arrays.sort(order, (a, b) -> batch[a].compareTo(batch[b]));
      Map<String, Integer> position = new HashMap<>();
      String[] sorted = new String[batch.length];
      for (int j = 0; j < order.length; j++) {
        sorted[j] = batch[order[j]];
        position.put(sorted[j], order[j]);
      }
      boolean round = !(first && own); // else the insert is the transaction's first statement
      if (first && !own) {
        command("savepoint " + names.batch());
        savepointSent = true;
      }
      if (round) {
        command("savepoint " + names.round());
      }
      try {
        try (PreparedStatement ps = c.prepareStatement(mariadb.claimBatch(batch.length, atOnce))) {
          int p = 1;
          for (String k : sorted) {
            ps.setString(p++, scope);
            ps.setString(p++, k);
          }
          try (ResultSet rs = Sql.resultAt(ps, 0)) {
            while (rs.next()) {
              Instant stamp = DbTime.read(rs, 2, true).toInstant();
              rows[position.get(rs.getString(1))] = new ClaimRow(true, 1, null, null, null,
                  stamp, null, null, false, false, null);
            }
          }
        }
        List<String> seen = new ArrayList<>();
        for (String k : sorted) {
          if (rows[position.get(k)] == null) {
            seen.add(k);
          }
        }
        if (!seen.isEmpty()) {
          try (PreparedStatement ps = bound(mariadb.readBatch(seen.size()), seen); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
              rows[position.get(rs.getString(10))] = ClaimRow.at(rs, started, true);
            }
          }
        }
      } catch (SQLException e) {
        throw claims.claimFailed(e);
      }
      if (round) {
        command("release savepoint " + names.round());
      }
      return rows;
    }

    /** {@code sql} prepared with the scope and then {@code keys} bound. */
    private PreparedStatement bound(String sql, List<String> keys) throws SQLException {
      PreparedStatement ps = c.prepareStatement(sql);
      ps.setString(1, scope);
      for (int j = 0; j < keys.size(); j++) {
        ps.setString(j + 2, keys.get(j));
      }
      return ps;
    }

    /**
     * MariaDB's re-claim of a batch's rows past their window: one key at a time (a rare path: rows
     * expiry has not deleted yet), each with the stamp it now has.
     */
    private Map<String, Instant> reclaimedOnMariaDb(String[] batch) {
      Map<String, Instant> taken = new HashMap<>();
      try {
        for (String k : batch) {
          Instant stamp = claims.reclaimStamp(c, new Binds(IdempotencyKey.of(scope, k), null));
          if (stamp != null) {
            taken.put(k, stamp);
          }
        }
      } catch (SQLException e) {
        throw claims.claimFailed(e);
      }
      return taken;
    }

    /** MariaDB's end of a batch whose effects at {@code failed} failed: their claims deleted, then the batch's savepoint released. */
    private void unclaimOnMariaDb(List<String> failed, boolean lastFailed) {
      if (lastFailed) {
        command("rollback to savepoint " + names.message());
      }
      try (PreparedStatement ps = bound(mariadb.unclaimBatch(failed.size()), failed)) {
        ps.execute();
      } catch (SQLException e) {
        throw claims.failed(e);
      }
      command(names.batchEnd());
    }

    /** The keys of {@code batch} a re-claim took, each with its stamp on MariaDB (null on PostgreSQL). */
    private Map<String, Instant> reclaimed(Sql sql, String[] batch) {
      if (mariadb != null) {
        return reclaimedOnMariaDb(batch);
      }
      try (PreparedStatement ps = prepare(sql, batch); ResultSet rs = Sql.resultAt(ps, 1)) {
        Array taken = rs.next() ? rs.getArray(1) : null;
        Map<String, Instant> keys = new HashMap<>();
        for (String k : taken == null ? new String[0] : (String[]) taken.getArray()) {
          keys.put(k, null);
        }
        return keys;
      } catch (SQLException e) {
        throw claims.claimFailed(e);
      }
    }

    private PreparedStatement prepare(Sql sql, String[] batch) throws SQLException {
      return sql.prepare(c, name -> switch (name) {
        case "scope" -> scope;
        case "keys" -> batch;
        default -> throw new IllegalStateException("no value for parameter " + name);
      });
    }

    private void command(String sql) {
      try {
        Driver.savepointCommand(c, sql);
      } catch (SQLException e) {
        throw claims.failed(e);
      }
    }
  }
}
