package dev.idem.jdbc.internal;

import static org.assertj.core.api.Assertions.assertThat;

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
}
