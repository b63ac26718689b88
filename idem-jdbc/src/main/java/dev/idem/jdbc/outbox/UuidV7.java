package dev.idem.jdbc.outbox;

import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Mints UUIDv7 ids (RFC 9562): 48 bits of Unix milliseconds, version 7, 12 bits that order ids made
 * in the same millisecond, the variant, 62 random bits.
 *
 * <p>Ids from one JVM strictly increase (method 3 of RFC 9562: the 12 bits after the version count
 * up within a millisecond, and when they run out the clock borrows the next millisecond). An ordered
 * relay relies on that: messages of one aggregate key enqueued one after the other in this JVM sort
 * in the order they were made. Across JVMs ids are ordered to the millisecond of each JVM's clock.
 */
final class UuidV7 {
  /** The high 64 bits last handed out: timestamp (48) | version (4) | counter (12). */
  private static final AtomicLong LAST = new AtomicLong();

  private UuidV7() {}

  static UUID next() {
    long now = (System.currentTimeMillis() << 16) | 0x7000L;
    long msb = LAST.updateAndGet(last -> {
      if (now > last) {
        return now;
      }
      long next = last + 1;
      // counter overflow carries into the timestamp: bump it and restart the counter after version 7
      return (next & 0xF000L) == 0x7000L ? next : (((last >>> 16) + 1) << 16) | 0x7000L;
    });
    long lsb = (ThreadLocalRandom.current().nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L;
    return new UUID(msb, lsb);
  }
}
