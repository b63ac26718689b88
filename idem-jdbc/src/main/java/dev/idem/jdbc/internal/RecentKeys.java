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
 * <p>A direct-mapped table of 64-bit key hashes: a newer key may overwrite an older one in its slot
 * (the older is then "not seen", which costs one round trip at most). Thread-safe without locks.
 */
public final class RecentKeys {
  private static final int SLOTS = 1 << 16; // 512 KiB per guard

  private final AtomicLongArray slots = new AtomicLongArray(SLOTS);

  /** True if {@code (scope, value)} may have been {@link #remember remembered}; false if it was not lately. */
  public boolean mightContain(String scope, String value) {
    long h = hash(scope, value);
    return slots.getOpaque(index(h)) == h;
  }

  public void remember(String scope, String value) {
    long h = hash(scope, value);
    slots.setOpaque(index(h), h);
  }

  private static int index(long h) {
    return (int) (h >>> 48) & (SLOTS - 1);
  }

  private static long hash(String scope, String value) {
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
