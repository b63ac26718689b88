package dev.idem.jdbc.claim;

import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
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
 * {@link #MAX_RESULT_BYTES}. A lossy table like {@link RecentKeys}: two candidate slots per key,
 * an older entry overwritten; a key not found is read from the database as before. Thread-safe
 * without locks: an entry is published whole (release, acquire), and a race may lose one, never
 * mix two.
 *
 * <p><b>Memory, allocated as it is used:</b> no table until the first row is kept; then {@value
 * #MIN_SLOTS} slots, doubled each time {@code slots / }{@value #CROWDED_DIVISOR} rows still inside
 * their time were pushed out for want of room (a table too small for the rows this guard keeps),
 * up to {@value #MAX_SLOTS} slots (32 KiB of references with compressed pointers). A doubling
 * copies only the rows still inside their time; a row found past its time is let go. So a guard
 * holds at most {@value #MAX_SLOTS} rows, each its key, its fingerprint and a result of at most
 * {@value #MAX_RESULT_BYTES} bytes (about 1.3 KiB in all): <b>about 11 MiB per guard at the very
 * most</b>, and a guard whose kept rows are few and small holds little.
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
  /** Rows with a larger stored result are not kept: at most {@link #MAX_SLOTS} rows of a guard, each with its key and a result up to this. */
  static final int MAX_RESULT_BYTES = 1024;
  /** The first table's slots. */
  static final int MIN_SLOTS = 1 << 6;
  /** The most slots a table grows to. */
  static final int MAX_SLOTS = 1 << 13;
  /** A table doubles once slots/CROWDED_DIVISOR rows inside their time were pushed out of it. */
  static final int CROWDED_DIVISOR = 32;

  /** {@code row} as old as it says at {@code agedAt}; kept until {@code untilNanos}. */
  private record Entry(String scope, String key, ClaimRow row, long agedAt, long untilNanos) {
    boolean is(IdempotencyKey k) {
      return key.equals(k.value()) && scope.equals(k.scope());
    }

    boolean sameKey(Entry other) {
      return key.equals(other.key) && scope.equals(other.scope);
    }
  }

  /** The longest a row is answered from memory. */
  private final Duration kept;
  /** Null until the first row is kept. */
  private final AtomicReference<AtomicReferenceArray<Entry>> table = new AtomicReference<>();
  /** Rows inside their time pushed out of the current table, while it may still grow. */
  private final AtomicInteger crowded = new AtomicInteger();
  private final AtomicBoolean growing = new AtomicBoolean();

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
    int slot = first(h, slots);
    Entry e = slots.getAcquire(slot);
    if (e == null || !e.is(key)) {
      slot = second(h, slots);
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
      table.compareAndExchange(null, new AtomicReferenceArray<>(MIN_SLOTS)); // a racing thread's table may win
      slots = table.getAcquire();
    }
    if (!put(slots, entry, System.nanoTime()) && slots.length() < MAX_SLOTS
        && crowded.incrementAndGet() >= Math.max(1, slots.length() / CROWDED_DIVISOR)) {
      grow(slots);
    }
  }

  /** The slots of the current table (0 before the first row is kept). */
  int slots() {
    AtomicReferenceArray<Entry> slots = table.getAcquire();
    return slots == null ? 0 : slots.length();
  }

  /**
   * Puts {@code entry} in one of its key's two slots: one that is free, holds the same key or a row
   * past its time, else one picked by the hash. False if that pushed out another key's row inside its time.
   */
  private static boolean put(AtomicReferenceArray<Entry> slots, Entry entry, long now) {
    long h = RecentKeys.hash(entry.scope, entry.key);
    int a = first(h, slots);
    int b = second(h, slots);
    Entry inA = slots.getAcquire(a);
    Entry inB = slots.getAcquire(b);
    boolean roomy = true;
    int slot;
    if (inA == null || inA.sameKey(entry) || now - inA.untilNanos >= 0) {
      slot = a;
    } else if (inB == null || inB.sameKey(entry) || now - inB.untilNanos >= 0) {
      slot = b;
    } else {
      slot = (h & 1) == 0 ? a : b;
      roomy = false;
    }
    slots.setRelease(slot, entry);
    return roomy;
  }

  /** Replaces {@code full} by a table twice its size holding its rows still inside their time; one thread grows, the others go on. */
  private void grow(AtomicReferenceArray<Entry> full) {
    if (!growing.compareAndSet(false, true)) {
      return;
    }
    try {
      if (table.getAcquire() != full) {
        return; // grown already
      }
      AtomicReferenceArray<Entry> bigger = new AtomicReferenceArray<>(full.length() * 2);
      long now = System.nanoTime();
      for (int i = 0; i < full.length(); i++) {
        Entry e = full.getAcquire(i);
        if (e != null && now - e.untilNanos < 0) {
          put(bigger, e, now);
        }
      }
      crowded.set(0);
      table.setRelease(bigger);
    } finally {
      growing.set(false);
    }
  }

  private static int first(long h, AtomicReferenceArray<Entry> slots) {
    return (int) h & (slots.length() - 1);
  }

  /** Another slot, never the same as {@link #first}. */
  private static int second(long h, AtomicReferenceArray<Entry> slots) {
    return first(h, slots) ^ (1 + (int) ((h >>> 40) & (slots.length() - 2)));
  }
}
