package dev.idem.testing;

import java.time.Instant;
import java.time.LocalDate;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Keys that carry their own time, as the partitioned layout needs them (docs/scale.md), for tests
 * and benchmarks that must mint them at a chosen time (a day boundary, a past day).
 */
public final class TimedKeys {
  private TimedKeys() {}

  /** A UUIDv7 minted at {@code t}: its first 48 bits are {@code t} in milliseconds, the rest random. */
  public static String uuidV7(Instant t) {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    long ms = t.toEpochMilli();
    return String.format("%08x-%04x-7%03x-%04x-%012x", ms >>> 16, ms & 0xffff, r.nextInt(0x1000),
        0x8000 | r.nextInt(0x4000), r.nextLong() & 0xffffffffffffL);
  }

  /**
   * The statement that creates the partition of the key table ({@code idem.idem_keys}) holding the
   * keys of {@code day} (UTC), as the partitioned layout's maintenance names and bounds it: by the
   * text of the day's first key ({@code idem_key_floor}), for a day the maintenance does not create
   * (one in the past). Bounds written as numbers would be accepted too, PostgreSQL turning them
   * into text, and file no key of that day.
   */
  public static String keyPartitionOf(LocalDate day) {
    return "CREATE TABLE idem.idem_keys_p" + day.toString().replace("-", "") + " PARTITION OF idem.idem_keys"
        + " FOR VALUES FROM (idem.idem_key_floor('" + day + "')) TO (idem.idem_key_floor('" + day.plusDays(1) + "'))";
  }
}
