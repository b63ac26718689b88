package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.AutoCommit;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim protocol of an effect no transaction can cover (the executor's external calls, the
 * notifications' sends), the one implementation of it: phase 1 claims the key's row in flight with
 * a fencing token and a lease, committed before anything goes out; phase 3 records the outcome,
 * fenced by that token, or ends the lease. Every statement runs in auto-commit on a connection of
 * its own. Not an API.
 *
 * <p>Guarantees: at most one holder of a key's live lease; a holder whose token is no longer the
 * highest never records; a serialization failure (40001, a pool at REPEATABLE READ or
 * SERIALIZABLE) never reaches the caller from a claim: it means "the row changed, look again", as
 * zero rows do under READ COMMITTED.
 */
public final class ExternalClaims {
  private static final Logger LOG = LoggerFactory.getLogger(ExternalClaims.class);
  private static final Duration FIRST_POLL = Duration.ofMillis(20);
  private static final Duration LONGEST_POLL = Duration.ofMillis(250);

  private final Claims claims;
  private final ClaimTable table;
  private final Duration inFlightWait;

  /**
   * @param claims the guard's engine over the key table, whose events, name and retry-after (the
   *     answer to a copy that lost every round) this uses
   * @param inFlightWait how long a copy that finds a live lease polls the row before it is answered
   *     in flight; zero answers at once
   */
  public ExternalClaims(Claims claims, Duration inFlightWait) {
    this.claims = claims;
    this.table = claims.table;
    this.inFlightWait = inFlightWait;
  }

  /** What phase 1 found for one call. */
  public sealed interface Claim permits Held, Completed, InFlight {}

  /**
   * This call holds the key's claim under {@code fence} (set in the call's binds too).
   *
   * @param takeover whether it took over an attempt of the same intent that never finished (its
   *     lease ended): that attempt may or may not have reached the outside world
   */
  public record Held(long fence, boolean takeover) implements Claim {}

  /** The key's row is completed, within its window and of this call's fingerprint: answer from it. */
  public record Completed(ClaimRow row) implements Claim {}

  /** Another copy holds a live lease (or kept winning the row): not this call's to run. */
  public record InFlight(Duration retryAfter) implements Claim {}

  /**
   * Phase 1, as a loop over what the key's row says: claim it, claim it again past its window,
   * take over an ended lease, answer from a completed row, or wait up to the in-flight wait for a
   * live lease and then answer in flight. Emits leaseTakenOver and inFlight as it decides.
   *
   * @throws dev.idem.key.KeyReuseException if the row within its window holds another fingerprint
   */
  public Claim claim(Binds binds) {
    long started = System.nanoTime();
    IdempotencyKey key = binds.key;
    long waitUntil = started + inFlightWait.toNanos(); // only this caller's patience
    Duration poll = FIRST_POLL;
    int changed = 0; // rounds in which the row changed under a write, or a write was refused 40001
    ClaimRow row = write(c -> ClaimTable.row(c, table.claimExternal, 0, binds, started));
    while (true) {
      if (row == null) {
        if (++changed >= Claims.MAX_CLAIM_ROUNDS || !claims.context.pause(changed)) {
          // Other copies keep winning the row: one of them holds it, so this copy is in flight.
          return inFlight(key, claims.retryAfter);
        }
        row = claims.read(binds, started);
        if (row == null) {
          row = write(c -> ClaimTable.row(c, table.claimExternal, 0, binds, started));
        }
        continue;
      }
      if (row.claimed()) {
        return held(binds, row.fence(), false, started);
      }
      if (row.expirable()) {
        // A new life of the key, under the same call key (a provider that still remembers it
        // absorbs a late repeat). If the last life's attempt never finished (its holder died)
        // and this is the same intent, it is a takeover of that attempt.
        boolean unfinished = !row.completed() && binds.sameFingerprint(row.fingerprint());
        Long fence = write(c -> ClaimTable.single(c, table.reclaimExternal, 0, binds));
        if (fence != null) {
          if (unfinished) {
            claims.events.leaseTakenOver(key, row.fence(), fence);
          }
          return held(binds, fence, unfinished, started);
        }
        row = null;
        continue;
      }
      claims.checkFingerprint(row, binds);
      if (row.completed()) {
        return new Completed(row);
      }
      if (!row.leaseLive()) {
        long previous = row.fence();
        Long fence = write(c -> ClaimTable.single(c, table.takeOver, 0, binds.fence(previous)));
        if (fence == null) {
          row = null; // another copy took over or completed first: look again
          continue;
        }
        claims.events.leaseTakenOver(key, previous, fence);
        return held(binds, fence, true, started);
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
      row = claims.read(binds, started);
    }
  }

  private static Held held(Binds binds, long fence, boolean takeover, long started) {
    binds.fence(fence);
    binds.claimedAt = started;
    return new Held(fence, takeover);
  }

  /**
   * The answer in flight, its event emitted: retry after {@code after} (a lease's time left), or
   * after the guard's retry-after when that is unknown or over.
   */
  public InFlight inFlight(IdempotencyKey key, Duration after) {
    return new InFlight(claims.inFlightRetryAfter(key, after));
  }

  /**
   * Phase 3's fenced write of {@code binds}' result, each try on a fresh connection, under the
   * claim rounds; null if another attempt holds the key now. A try that fails with 40001 (the row
   * changed under it, or, at SERIALIZABLE, only its index pages did), or whose connection failed,
   * is made again while the row still carries this token, so a holder that is still the highest is
   * never told it was taken over, and a dead connection does not leave the key in flight for the
   * whole lease. If the record fails for good, the failure is thrown and the record is handed to
   * the background ({@link #settleLater}): tried again until the database answers, at most until
   * the lease would have ended; a failure that is not the connection's ends the lease instead.
   */
  public Long record(Binds binds, long token) {
    return record(binds, token, true);
  }

  /**
   * {@link #record(Binds, long)}, for a record made after the effect ({@code effectDone}) or
   * before it (a notification recorded sent before the send). A record made before the effect that
   * fails for good is never made in the background: the caller is told it failed and does not make
   * the effect, so recording it later would answer every redelivery with an effect that never
   * happened. Its lease is ended instead (in the background if the database does not answer).
   */
  public Long record(Binds binds, long token, boolean effectDone) {
    try {
      return recordTries(binds, token);
    } catch (RuntimeException e) {
      // The outcome happened and could not be recorded. Recording it later is better than ending
      // the lease: the key completes with the true outcome and nobody calls the provider again.
      if (effectDone && SqlStates.isConnectionFailure(e)) {
        settleLater(binds, token, true, binds.result, e);
      } else {
        endLease(binds, token, e);
      }
      throw e;
    }
  }

  private Long recordTries(Binds binds, long token) {
    binds.fence(token);
    for (int run = 1; ; run++) {
      try {
        Long recorded = write(c -> ClaimTable.single(c, table.complete, 0, binds));
        if (recorded != null) {
          return recorded;
        }
        ClaimRow row = claims.read(binds, System.nanoTime());
        if (row != null && row.completed() && row.fence() == token) {
          // An earlier try committed and its answer was lost with the connection: no other write
          // completes a row under this token (every takeover and re-claim raises it).
          return token;
        }
        if (row == null || row.completed() || row.fence() != token) {
          return null;
        }
        if (run >= Claims.MAX_CLAIM_ROUNDS) {
          throw new DataAccessException("could not record the result of key " + binds.key + " in "
              + run + " runs: each failed with a serialization failure");
        }
        claims.context.pause(run);
      } catch (DataAccessException e) {
        if (run >= Claims.MAX_CLAIM_ROUNDS || !(SqlStates.isRetryable(e) || SqlStates.isConnectionFailure(e))) {
          throw e;
        }
        claims.context.pause(run);
      }
    }
  }

  /**
   * Ends the lease held under {@code token} at once (its call threw, or its record failed), so a
   * repeat takes over without waiting. If the database does not answer, the failure is attached to
   * {@code failure} and the lease end is handed to the background ({@link #settleLater}).
   */
  public void endLease(Binds binds, long token, Throwable failure) {
    try {
      endLeaseOnce(binds, token);
    } catch (RuntimeException e) {
      failure.addSuppressed(e); // the call's failure matters more
      settleLater(binds, token, false, null, failure);
    }
  }

  private void endLeaseOnce(Binds binds, long token) {
    write(c -> {
      ClaimTable.run(c, table.endLease, binds.fence(token));
      return null;
    });
  }

  /**
   * Takes over the key's claim from the attempt that holds it under {@code previous}, if that
   * attempt's lease is over: fence + 1 and a new lease, as a repeat's takeover does. For a caller
   * that finishes an unknown outcome without calling out (the completer).
   *
   * @return the new fence (set in {@code binds}, with the claim's time), or null if the row is not
   *     in flight under {@code previous} with its lease over (a live holder, another taker, completed)
   */
  public Long takeOver(Binds binds, long previous) {
    long started = System.nanoTime();
    Long fence = write(c -> ClaimTable.single(c, table.takeOver, 0, binds.fence(previous)));
    if (fence != null) {
      held(binds, fence, true, started);
      claims.events.leaseTakenOver(binds.key, previous, fence);
    }
    return fence;
  }

  // ---------------------------------------------------------------------------------------------
  // Phase 3 left behind by an outage

  /** The first wait between background tries; doubled up to {@link #SETTLE_LONGEST}. */
  private static final Duration SETTLE_FIRST = Duration.ofMillis(20);
  /**
   * The longest wait between background tries: short, so the key answers within a fraction of a
   * second of the database's return (each try costs one statement, only during an outage).
   */
  private static final Duration SETTLE_LONGEST = Duration.ofMillis(200);

  /**
   * The background thread of this guard, made when first needed: at most one, a daemon, gone
   * after 10 s without work. Its queue holds one task per phase 3 that failed while the database
   * did not answer: at most the calls of one lease.
   */
  private volatile ThreadPoolExecutor settler;

  /**
   * Hands phase 3 to the background: records {@code result} under {@code token} if {@code record}
   * (a null result is a record too: a codec that stores nothing, a call that returned null), else
   * ends the lease, trying again with a bounded back-off until a try gets an answer from the
   * database or the lease would have ended anyway (then the key is an unknown outcome, for a
   * resolver or an operator). Fenced as the caller's own try: a row that moved on is left alone.
   */
  private void settleLater(Binds binds, long token, boolean record, byte[] result, Throwable failure) {
    if (table.lease == null || binds.claimedAt == 0) {
      return; // not an external claim of this guard's: nothing to finish
    }
    Binds mine = new Binds(binds.key, binds.fingerprint); // the caller's binds are the caller's
    mine.callKey = binds.callKey;
    mine.claimedAt = binds.claimedAt;
    long deadline = binds.claimedAt + table.lease.toNanos();
    String what = (record ? "the record of key " : "the lease end of key ") + binds.key + " under fence " + token;
    LOG.warn("{} failed ({}); trying again in the background until the database answers, at most until the lease ends",
        what, failure.getMessage());
    try {
      settler().execute(() -> settle(mine, token, record, result, deadline, what));
    } catch (RejectedExecutionException e) {
      failure.addSuppressed(e); // shut down: the lease ends on its own
    }
  }

  private ThreadPoolExecutor settler() {
    ThreadPoolExecutor s = settler;
    if (s == null) {
      synchronized (this) {
        s = settler;
        if (s == null) {
          String name = "idem-settle-" + claims.name;
          s = new ThreadPoolExecutor(0, 1, 10, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true); // never keeps the JVM alive: what it leaves, the lease ends
            return t;
          });
          settler = s;
        }
      }
    }
    return s;
  }

  private void settle(Binds binds, long token, boolean record, byte[] result, long deadline, String what) {
    Duration wait = SETTLE_FIRST;
    boolean recording = record;
    for (int tries = 1; ; tries++) {
      RuntimeException failed = null;
      try {
        if (recording) {
          binds.result(result).fence(token);
          Long recorded = write(c -> ClaimTable.single(c, table.complete, 0, binds));
          if (recorded != null) {
            LOG.info("{} recorded in the background (try {})", what, tries);
            return;
          }
          // Zero rows, or 40001 (the row changed under a snapshot at REPEATABLE READ or
          // SERIALIZABLE, or only its index pages did): look at the row before giving up, as
          // recordTries does, or a serialization failure would drop the record.
          ClaimRow row = claims.read(binds, System.nanoTime());
          if (row == null || row.completed() || row.fence() != token) {
            // Completed by an earlier try whose answer was lost, taken over, or released: either
            // way the row is no longer this attempt's to write.
            LOG.info("{}: the row moved on (try {}); nothing written", what, tries);
            return;
          }
        } else {
          endLeaseOnce(binds, token);
          LOG.info("{} done in the background (try {})", what, tries);
          return;
        }
      } catch (RuntimeException e) {
        if (recording && !SqlStates.isConnectionFailure(e) && !SqlStates.isRetryable(e)) {
          recording = false; // the database answered and refused the record: end the lease instead
          what = "the lease end of key " + binds.key + " under fence " + token;
          continue;
        }
        failed = e;
      }
      if (System.nanoTime() - deadline >= 0) {
        LOG.warn("{} given up after {} tries, the lease being over: the key is an unknown outcome ({})", what, tries,
            failed == null ? "the row still in flight under this token" : failed.getMessage());
        return;
      }
      try {
        Thread.sleep(Math.max(1, ThreadLocalRandom.current().nextLong(wait.toMillis() / 2, wait.toMillis() + 1)));
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        return; // shut down: the lease ends on its own
      }
      wait = wait.multipliedBy(2).compareTo(SETTLE_LONGEST) > 0 ? SETTLE_LONGEST : wait.multipliedBy(2);
    }
  }

  /** The highest fence of the key's row (0 if it has none): what a stale holder is told. */
  public long highestFence(Binds binds) {
    Long highest = claims.context.autoCommit(claims.name, c -> ClaimTable.single(c, table.fenceOf, 0, binds));
    return highest == null ? 0 : highest;
  }

  /**
   * An external-mode write, in auto-commit like every external statement. At REPEATABLE READ or
   * SERIALIZABLE, one that waited for another copy's write to the key's row fails with 40001 once
   * that write commits, because the row changed under its snapshot. That is the case zero rows
   * stand for under READ COMMITTED, and it is answered the same way: null, so the caller looks at
   * the row again in a new statement. The failed statement wrote nothing.
   */
  private <R> R write(AutoCommit.Work<R> work) {
    try {
      return claims.context.autoCommitOnce(claims.name, work);
    } catch (DataAccessException e) {
      if (SqlStates.is(e, SqlStates.SERIALIZATION_FAILURE)) {
        return null;
      }
      throw e;
    }
  }
}
