package dev.idem.http;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The guarded requests this filter is running now, one per key: the first copy of a key in this
 * process leads (it goes to the database); every other copy waits here, on the leader's entry,
 * holding no pool connection, and is then told what to do.
 *
 * <p>Why it exists: the executor claims a key with an insert that commits with the handler's
 * writes, so while the first copy runs its row is invisible to every other transaction, and a copy
 * that went to the database would sit on that row lock holding a connection (and, under a
 * framework transaction, one taken at begin) for the whole in-flight wait: a retry storm of one
 * slow request would take the pool. Waiting here costs a request thread and no connection. The
 * database wait remains for copies that reach another process, and is bounded there.
 *
 * <p>It also tells "the same request, still running" (wait) from "another request under a key in
 * use" (422 at once): the leader's fingerprint is known here once its claim succeeded, long before
 * the database could tell anyone.
 */
final class InFlightRequests {
  /** What a copy that waited is to do next. */
  enum Turn {
    /** No copy of the key runs here: go to the database (this copy now leads). */
    LEAD,
    /** The leader committed (or found the key committed): the database answers this copy at once. */
    ASK_THE_STORE,
    /** The leader holds the key's claim with another fingerprint: 422, now. */
    REUSED,
    /** The wait ended first, or the leader itself found the key held elsewhere: 409. */
    IN_FLIGHT
  }

  /** What the leader's run left behind, for the copies waiting on it. */
  enum Left {
    /** A committed key row (applied, replayed or refused as reused): the store answers every copy. */
    COMMITTED,
    /** Nothing (rolled back, not stored, failed): the key is free and a waiting copy may lead. */
    NOTHING,
    /** The key is held by a copy outside this process past the in-flight wait. */
    HELD_ELSEWHERE
  }

  private final ConcurrentHashMap<IdempotencyKey, Entry> running = new ConcurrentHashMap<>();

  /** A copy of a request under {@code key}; it waits or leads through {@link #admit}. */
  Entry entry(IdempotencyKey key, Fingerprint fingerprint) {
    return new Entry(key, fingerprint);
  }

  /**
   * Makes {@code mine} the leader of its key, or waits (at most {@code wait}, holding nothing but
   * this thread) for the copy leading now and says what to do. A leader that rolls back hands the
   * key to one of the waiting copies, within the same bound.
   */
  Turn admit(Entry mine, Duration wait) {
    long deadline = System.nanoTime() + wait.toNanos();
    while (true) {
      Entry leader = running.putIfAbsent(mine.key, mine);
      if (leader == null) {
        return Turn.LEAD;
      }
      synchronized (leader) {
        while (true) {
          if (leader.left == Left.COMMITTED) {
            return Turn.ASK_THE_STORE;
          }
          if (leader.left == Left.HELD_ELSEWHERE) {
            return Turn.IN_FLIGHT;
          }
          if (leader.left == Left.NOTHING) {
            break; // the key is free again: try to lead
          }
          if (leader.claimed && !leader.fingerprint.equals(mine.fingerprint)) {
            return Turn.REUSED;
          }
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            return Turn.IN_FLIGHT;
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(leader, left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the container is stopping: answer, do not wait on
            return Turn.IN_FLIGHT;
          }
        }
      }
    }
  }

  /**
   * One copy. Equal by identity: a leader removes only itself. A copy that never led is never in
   * the map, and its {@link #left} calls do nothing.
   */
  final class Entry {
    private final IdempotencyKey key;
    private final Fingerprint fingerprint;
    private boolean claimed; // guarded by this
    private Left left; // guarded by this

    private Entry(IdempotencyKey key, Fingerprint fingerprint) {
      this.key = key;
      this.fingerprint = fingerprint;
    }

    /** Called from the effect: this copy's claim succeeded and its handler runs. */
    synchronized void holds() {
      claimed = true;
      notifyAll();
    }

    /** The leader has its answer; the copies waiting on it are told what it left. */
    void left(Left what) {
      if (running.remove(key, this)) {
        // Out of the map first, then told: a copy that arrives now leads, one that found this entry
        // before is woken here.
        synchronized (this) {
          left = what;
          notifyAll();
        }
      }
    }
  }
}
