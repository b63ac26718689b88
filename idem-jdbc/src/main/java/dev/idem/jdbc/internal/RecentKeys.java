package dev.idem.jdbc.internal;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A lossy memory of the keys (or message ids) a guard handled lately, of bounded size: a hint that
 * decides which path a call tries first, never whether a key is new. Not an API.
 *
 * <p>Most calls carry a new key, and for them a read before the claim is a wasted round trip; a
 * repeat that reaches the same process (a client retry on a kept-alive connection, a redelivery
 * to the same worker) is cheapest as one auto-commit read. So the executor and the inbox read
 * first only for a key they may have seen, and claim first otherwise. Both paths are correct for
 * every key: the claim answers a key the memory never saw (first handled by another process, or
 * forgotten), and the read falls through to the claim for a key that turns out new. This is the
 * seed's "probabilistic pre-check": it saves reads, never decides correctness.
 *
 * <p>A table of 64-bit key hashes in which each key has two candidate slots, picked by different
 * bits of its hash among eight neighbouring slots (one or two cache lines, so a look-up costs
 * about one cache miss, not two). A key is remembered in the first of its two that is free, else
 * in one of them picked by its hash, overwriting an older key (which is then "not seen": one round
 * trip more, at most). With one slot per key, two keys that shared a slot pushed each other out
 * on every call (one in thirty of 2,000 keys in a benchmark); with two, a key is only lost when
 * both its slots hold other keys. Thread-safe without locks: a race may lose a remembered key,
 * never corrupt one.
 *
 * <p><b>Memory, allocated as it is used:</b> nothing until the first key; then a table of {@value
 * #MIN_SLOTS} slots (4 KiB), doubled whenever more than one slot in {@value #LOAD_DIVISOR} holds a
 * key (128 to 256 bytes per distinct key: so sparse that a key is rarely pushed out), up to
 * {@value #MAX_SLOTS} slots: <b>512 KiB per guard at most</b>, reached after about 2,000 distinct
 * keys. From then on older keys are overwritten as before. A doubling copies the keys into the new
 * table, and the old one is garbage; a key remembered meanwhile may be lost, as in any race here.
 */
public final class RecentKeys {
  /** The first table's slots: 4 KiB. */
  static final int MIN_SLOTS = 1 << 9;
  /** The most slots a table grows to: 512 KiB. (The slot index uses 16 bits of the hash.) */
  static final int MAX_SLOTS = 1 << 16;
  /** A table doubles once more than 1/LOAD_DIVISOR of its slots hold a key. */
  static final int LOAD_DIVISOR = 16;

  /** Null until the first key is remembered. */
  private final AtomicReference<AtomicLongArray> table = new AtomicReference<>();
  /** Slots of the current table that hold a key, while it may still grow. */
  private final AtomicInteger filled = new AtomicInteger();
  private final AtomicBoolean growing = new AtomicBoolean();

  /** True if {@code (scope, value)} may have been {@link #remember remembered}; false if it was not lately. */
  public boolean mightContain(String scope, String value) {
    AtomicLongArray slots = table.getAcquire();
    if (slots == null) {
      return false;
    }
    long h = hash(scope, value);
    return slots.getOpaque(first(h, slots)) == h || slots.getOpaque(second(h, slots)) == h;
  }

  public void remember(String scope, String value) {
    AtomicLongArray slots = table.getAcquire();
    if (slots == null) {
      table.compareAndExchange(null, new AtomicLongArray(MIN_SLOTS)); // a racing thread's table may win
      slots = table.getAcquire();
    }
    if (put(slots, hash(scope, value)) && slots.length() < MAX_SLOTS
        && filled.incrementAndGet() > slots.length() / LOAD_DIVISOR) {
      grow(slots);
    }
  }

  /** The slots of the current table (0 before the first key): its size is 8 bytes a slot. */
  int slots() {
    AtomicLongArray slots = table.getAcquire();
    return slots == null ? 0 : slots.length();
  }

  /** Puts {@code h} in one of its two slots; true if that filled an empty slot. */
  private static boolean put(AtomicLongArray slots, long h) {
    int a = first(h, slots);
    int b = second(h, slots);
    long inA = slots.getOpaque(a);
    long inB = slots.getOpaque(b);
    if (inA == h || inB == h) {
      return false;
    }
    if (inA == 0) {
      slots.setOpaque(a, h);
      return true;
    }
    if (inB == 0) {
      slots.setOpaque(b, h);
      return true;
    }
    slots.setOpaque((h & 1) == 0 ? a : b, h);
    return false;
  }

  /** Replaces {@code full} by a table twice its size holding its keys; one thread grows, the others go on. */
  private void grow(AtomicLongArray full) {
    if (!growing.compareAndSet(false, true)) {
      return;
    }
    try {
      if (table.getAcquire() != full) {
        return; // grown already
      }
      AtomicLongArray bigger = new AtomicLongArray(full.length() * 2);
      int n = 0;
      for (int i = 0; i < full.length(); i++) {
        long h = full.getOpaque(i);
        if (h != 0 && put(bigger, h)) {
          n++;
        }
      }
      filled.set(n);
      table.setRelease(bigger);
    } finally {
      growing.set(false);
    }
  }

  private static int first(long h, AtomicLongArray slots) {
    return (int) (h >>> 48) & (slots.length() - 1);
  }

  /** Another slot of the same group of eight longs as {@link #first}: never the same one. */
  private static int second(long h, AtomicLongArray slots) {
    return first(h, slots) ^ (1 + (int) (((h >>> 24) & 0xffff) % 7));
  }

  /** A well-mixed 64-bit hash of {@code (scope, value)}, never 0. */
  public static long hash(String scope, String value) {
    long h = ((long) scope.hashCode() << 32) ^ (value.hashCode() & 0xffffffffL);
    // fmix64 from MurmurHash3, so the slot index uses well-mixed bits
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h == 0 ? 1 : h; // 0 marks an empty slot
  }
}
