package dev.idem.jdbc.internal;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A lossy, fixed-size memory of the keys (or message ids) a guard handled lately: a hint that
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
 */
public final class RecentKeys {
  private static final int SLOTS = 1 << 16; // 512 KiB per guard

  private final AtomicLongArray slots = new AtomicLongArray(SLOTS);

  /** True if {@code (scope, value)} may have been {@link #remember remembered}; false if it was not lately. */
  public boolean mightContain(String scope, String value) {
    long h = hash(scope, value);
    return slots.getOpaque(first(h)) == h || slots.getOpaque(second(h)) == h;
  }

  public void remember(String scope, String value) {
    long h = hash(scope, value);
    int a = first(h);
    int b = second(h);
    long inA = slots.getOpaque(a);
    long inB = slots.getOpaque(b);
    if (inA == h || inB == h) {
      return;
    }
    if (inA == 0) {
      slots.setOpaque(a, h);
    } else if (inB == 0) {
      slots.setOpaque(b, h);
    } else {
      slots.setOpaque((h & 1) == 0 ? a : b, h);
    }
  }

  private static int first(long h) {
    return (int) (h >>> 48) & (SLOTS - 1);
  }

  /** Another slot of the same group of eight longs as {@link #first}: never the same one. */
  private static int second(long h) {
    return first(h) ^ (1 + (int) (((h >>> 24) & 0xffff) % 7));
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
