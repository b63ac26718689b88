package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The completed rows a guard applied or read lately, kept in memory for a short while so that a
 * repeat reaching the same instance again is answered without a round trip. Not an API.
 *
 * <p>Why an answer from memory is the database's answer: a completed row within its window never
 * changes. Nothing idem does rewrites or deletes it before its window ends (a re-claim and expiry
 * both need the row past its window; {@code Operations} resolves and releases rows in flight
 * only), and a repeat within the window is answered from it: the replay, or {@code
 * KeyReuseException} for another request. So a row is kept only while it is completed and inside
 * its window as the database reported it, measured conservatively on this JVM's monotonic clock
 * from before the statement that saw it (the window ends here no later than it does in the
 * database), and for the time {@code Idem.Builder.answersFromMemory} sets at most (30 seconds by
 * default): a row changed or deleted by hand is seen again by every instance within that time.
 * Set to zero, {@link #keptFor} gives a table that keeps nothing. (Should the database's clock
 * step forward meanwhile, a repeat may be replayed from memory shortly after the database's window
 * ended: a replay where a new run was allowed, never a second effect.)
 *
 * <p>Kept: the row of a key this guard applied in a transaction of its own, once committed (the
 * claim returns the time it wrote), and a completed row a read-first answered from. Never: a call
 * in the caller's transaction (the commit is the caller's), a row in flight, a result larger than
 * {@link #MAX_RESULT_BYTES}. A lossy, fixed-size table like {@link RecentKeys}: two candidate
 * slots per key, an older entry overwritten; a key not found is read from the database as before.
 * Thread-safe without locks: an entry is published whole (release, acquire), and a race may lose
 * one, never mix two.
 *
 * <p><b>Memory, allocated as it is used:</b> no table until the first row is kept; then {@value
 * #SLOTS} slots (32 KiB of references with compressed pointers). A guard so holds {@value #SLOTS}
 * rows at most, each its key, its fingerprint and a result of at most {@value #MAX_RESULT_BYTES}
 * bytes, about 1.4 KiB in all (measured by {@code RecentAnswersTest}): <b>about 11.5 MiB per guard at
 * the very most</b>, for results near 1 KiB; a row is let go when a look-up finds it past its time,
 * or when another takes its slot.
 */
class RecentAnswers {
  /** Keeps nothing: every repeat goes to the database. */
  private static final RecentAnswers NONE = new RecentAnswers(Duration.ZERO) {
    @Override
    ClaimRow answer(IdempotencyKey key) {
      return null;
    }

    @Override
    void remember(IdempotencyKey key, ClaimRow row, long agedAt, long sinceNanos) {
    }
  };
  /** Rows with a larger stored result are not kept: at most {@link #SLOTS} rows of a guard, each with its key and a result up to this. */
  static final int MAX_RESULT_BYTES = 1024;
  /** The table's slots, and so the most rows a guard keeps. */
  static final int SLOTS = 1 << 13;

  /** {@code row} as old as it says at {@code agedAt}; kept until {@code untilNanos}. */
  private record Entry(String scope, String key, ClaimRow row, long agedAt, long untilNanos) {
    boolean is(IdempotencyKey k) {
      return key.equals(k.value()) && scope.equals(k.scope());
    }
  }

  /** The longest a row is answered from memory. */
  private final Duration kept;
  /** Null until the first row is kept. */
  private final AtomicReference<AtomicReferenceArray<Entry>> table = new AtomicReference<>();

  private RecentAnswers(Duration kept) {
    this.kept = kept;
  }

  /** A table that answers for {@code kept} at most; zero: one that keeps nothing. */
  static RecentAnswers keptFor(Duration kept) {
    return kept.isZero() ? NONE : new RecentAnswers(kept);
  }

  /** The key's completed row as it is now, if kept and still inside its window; else null. */
  ClaimRow answer(IdempotencyKey key) {
    AtomicReferenceArray<Entry> slots = table.getAcquire();
    if (slots == null) {
      return null;
    }
    long h = RecentKeys.hash(key.scope(), key.value());
    int slot = first(h);
    Entry e = slots.getAcquire(slot);
    if (e == null || !e.is(key)) {
      slot = second(h);
      e = slots.getAcquire(slot);
      if (e == null || !e.is(key)) {
        return null;
      }
    }
    long now = System.nanoTime();
    if (now - e.untilNanos >= 0) {
      slots.compareAndExchangeRelease(slot, e, null); // past its time: let the row go
      return null;
    }
    return e.row.after(Duration.ofNanos(Math.max(0, now - e.agedAt)));
  }

  /**
   * Keeps {@code row}, a completed row inside its window as a statement saw it: as old as it says
   * at {@code agedAt}, and with as much of its window left as it says at {@code sinceNanos}, the
   * monotonic start of the call, before that statement was sent (so the window ends here no later
   * than in the database; a wait or a retry of the call only shortens the time kept).
   */
  void remember(IdempotencyKey key, ClaimRow row, long agedAt, long sinceNanos) {
    if (row.result() != null && row.result().length > MAX_RESULT_BYTES) {
      return;
    }
    Duration left = row.windowLeft().compareTo(kept) < 0 ? row.windowLeft() : kept;
    if (left.isNegative() || left.isZero()) {
      return;
    }
    Entry entry = new Entry(key.scope(), key.value(), row, agedAt, sinceNanos + left.toNanos());
    AtomicReferenceArray<Entry> slots = table.getAcquire();
    if (slots == null) {
      table.compareAndExchange(null, new AtomicReferenceArray<>(SLOTS)); // a racing thread's table may win
      slots = table.getAcquire();
    }
    long h = RecentKeys.hash(key.scope(), key.value());
    int a = first(h);
    int b = second(h);
    Entry inA = slots.getAcquire(a);
    Entry inB = slots.getAcquire(b);
    long now = System.nanoTime();
    int slot;
    if (inA == null || inA.is(key) || now - inA.untilNanos >= 0) {
      slot = a;
    } else if (inB == null || inB.is(key) || now - inB.untilNanos >= 0) {
      slot = b;
    } else {
      slot = (h & 1) == 0 ? a : b;
    }
    slots.setRelease(slot, entry);
  }

  /** The table's slots: 0 before the first row is kept. */
  int slots() {
    AtomicReferenceArray<Entry> slots = table.getAcquire();
    return slots == null ? 0 : slots.length();
  }

  /** The rows held now, past their time or not. */
  int held() {
    AtomicReferenceArray<Entry> slots = table.getAcquire();
    int n = 0;
    for (int i = 0; slots != null && i < slots.length(); i++) {
      n += slots.getAcquire(i) == null ? 0 : 1;
    }
    return n;
  }

  private static int first(long h) {
    return (int) h & (SLOTS - 1);
  }

  /** Another slot, never the same as {@link #first}. */
  private static int second(long h) {
    return first(h) ^ (1 + (int) ((h >>> 40) & (SLOTS - 2)));
  }
}
