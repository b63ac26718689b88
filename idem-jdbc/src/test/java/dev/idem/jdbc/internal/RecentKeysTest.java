package dev.idem.jdbc.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The memory is a hint, so what matters is how often it answers right; no database involved. */
class RecentKeysTest {

  @Test
  void remembersEveryOneOfAFewThousandKeys() {
    RecentKeys recent = new RecentKeys();
    for (int i = 0; i < 4_000; i++) {
      recent.remember("orders", "key-" + i);
    }
    // remembering them again, as repeats do, must not push any of them out
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 4_000; i++) {
        recent.remember("orders", "key-" + i);
      }
    }
    int forgotten = 0;
    for (int i = 0; i < 4_000; i++) {
      if (!recent.mightContain("orders", "key-" + i)) {
        forgotten++;
      }
    }
    // with one slot per key about 240 of them (two per colliding pair) were lost; with two
    // slots a key is lost only when both hold other keys: a handful at most
    assertThat(forgotten).isLessThan(20);
  }

  @Test
  void aKeyNeverRememberedIsNotSeen() {
    RecentKeys recent = new RecentKeys();
    for (int i = 0; i < 4_000; i++) {
      recent.remember("orders", "key-" + i);
    }
    int falseHits = 0;
    for (int i = 0; i < 100_000; i++) {
      if (recent.mightContain("orders", "new-" + i)) {
        falseHits++;
      }
    }
    assertThat(falseHits).isZero(); // a false hit needs two equal 64-bit hashes
    assertThat(recent.mightContain("payments", "key-1")).as("another scope").isFalse();
  }

  @Test
  void anOverwrittenKeyComesBackWhenRememberedAgain() {
    RecentKeys recent = new RecentKeys();
    for (int i = 0; i < 300_000; i++) { // far more keys than slots: most early ones are pushed out
      recent.remember("orders", "key-" + i);
    }
    assertThat(recent.mightContain("orders", "key-299999")).isTrue();
    recent.remember("orders", "key-0");
    assertThat(recent.mightContain("orders", "key-0")).isTrue();
  }

  @Test
  void aTableIsAllocatedAsKeysArriveAndStopsAtItsBound() {
    RecentKeys recent = new RecentKeys();
    assertThat(recent.slots()).as("before the first key").isZero();
    assertThat(recent.mightContain("orders", "key-0")).isFalse();

    recent.remember("orders", "key-0");
    assertThat(recent.slots()).as("the first table: 4 KiB").isEqualTo(RecentKeys.MIN_SLOTS);
    for (int i = 1; i < 100; i++) {
      recent.remember("orders", "key-" + i);
    }
    // doubled while more than one slot in 16 held a key: 100 keys take 2,048 slots (16 KiB)
    assertThat(recent.slots()).isEqualTo(2_048);
    assertThat(IntStream.range(0, 100).filter(i -> !recent.mightContain("orders", "key-" + i)).count())
        .as("keys remembered before a doubling are still seen").isZero();

    for (int i = 100; i < 200_000; i++) {
      recent.remember("orders", "key-" + i);
    }
    assertThat(recent.slots()).as("the bound: 512 KiB").isEqualTo(RecentKeys.MAX_SLOTS).isEqualTo(1 << 16);
    assertThat(recent.mightContain("orders", "key-199999")).isTrue();
  }

  /**
   * The figures the Javadoc and docs/executor.md give, measured: the bytes this thread allocated
   * (HotSpot's per-thread counter) to build a table and remember keys whose strings exist already.
   */
  @Test
  void measuredBytes() {
    String[] keys = IntStream.range(0, 200_000).mapToObj(i -> "key-" + i).toArray(String[]::new);
    for (String k : keys) {
      k.hashCode(); // cached in the string, as a key's is by the time a guard sees it
    }
    RecentKeys[] table = new RecentKeys[1];
    // once before measuring, so that the counts hold no first-use allocation (classes, lambdas)
    AllocatedBytes.of(() -> rememberAll(new RecentKeys(), keys, 0, 10));
    long unused = AllocatedBytes.of(() -> table[0] = new RecentKeys());
    long tenKeys = AllocatedBytes.of(() -> rememberAll(table[0], keys, 0, 10));
    long manyKeys = AllocatedBytes.of(() -> rememberAll(table[0], keys, 10, keys.length));
    System.out.printf("RecentKeys: unused %d B, first 10 keys %d B, 200,000 keys %d B in all, retained table %d B%n",
        unused, tenKeys, tenKeys + manyKeys, table[0].slots() * 8L);
    assertThat(unused).as("a guard that never remembers a key").isLessThan(1_024);
    assertThat(tenKeys).as("the first table, 4 KiB").isBetween(4_096L, 8_192L);
    // every table once, 4 KiB + 8 KiB + ... + 512 KiB, each garbage once doubled: under 1 MiB and a bit
    assertThat(tenKeys + manyKeys).isLessThan(1_100_000L);
    assertThat(table[0].slots() * 8L).as("retained").isEqualTo(512 * 1024);
  }

  private static void rememberAll(RecentKeys recent, String[] keys, int from, int to) {
    for (int i = from; i < to; i++) {
      recent.remember("orders", keys[i]);
    }
  }
}
