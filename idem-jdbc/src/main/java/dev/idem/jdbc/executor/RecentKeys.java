package dev.idem.jdbc.executor;

import dev.idem.key.IdempotencyKey;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A lossy, fixed-size memory of the keys this executor handled lately: a hint that decides which
 * path a call tries first, never whether a key is new.
 *
 * <p>Most calls carry a new key, and for them a read before the claim is a wasted round trip; a
 * repeat that reaches the same process (a client retry on a kept-alive connection, a redelivery
 * to the same worker) is cheapest as one auto-commit read. So the executor reads first only for a
 * key it may have seen, and claims first otherwise. Both paths are correct for every key: the
 * claim-or-read statement replays a completed key the memory never saw (first handled by another
 * process, or forgotten), and the read falls through to the claim for a key that turns out new.
 * This is the seed's "probabilistic pre-check": it saves reads, never decides correctness.
 *
 * <p>A direct-mapped table of 64-bit key hashes: a newer key may overwrite an older one in its slot
 * (the older is then "not seen", which costs one round trip at most). Thread-safe without locks.
 */
final class RecentKeys {
  private static final int SLOTS = 1 << 16; // 512 KiB per executor

  private final AtomicLongArray slots = new AtomicLongArray(SLOTS);

  boolean mightContain(IdempotencyKey key) {
    long h = hash(key);
    return slots.getOpaque(index(h)) == h;
  }

  void remember(IdempotencyKey key) {
    long h = hash(key);
    slots.setOpaque(index(h), h);
  }

  private static int index(long h) {
    return (int) (h >>> 48) & (SLOTS - 1);
  }

  private static long hash(IdempotencyKey key) {
    long h = ((long) key.scope().hashCode() << 32) ^ (key.value().hashCode() & 0xffffffffL);
    // fmix64 from MurmurHash3, so the slot index uses well-mixed bits
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h == 0 ? 1 : h; // 0 marks an empty slot
  }
}
