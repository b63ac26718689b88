package dev.idem.jdbc.internal.claim;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.internal.AllocatedBytes;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The rows a guard keeps in memory take room as they come, up to a bound: no table before the
 * first row kept, and at most {@link RecentAnswers#SLOTS} rows, whose bytes are measured here. No
 * database: the rows are built.
 */
class RecentAnswersTest {
  private static final Duration KEPT = Duration.ofSeconds(30);

  @Test
  void noTableBeforeTheFirstRowAndNoneWhenKeepingNothing() {
    RecentAnswers answers = RecentAnswers.keptFor(KEPT);
    assertThat(answers.slots()).isZero();
    assertThat(answers.answer(key(0))).isNull();

    answers.remember(key(0), row(10), 0, System.nanoTime());
    assertThat(answers.slots()).isEqualTo(RecentAnswers.SLOTS);
    assertThat(answers.answer(key(0))).isNotNull();

    RecentAnswers none = RecentAnswers.keptFor(Duration.ZERO);
    none.remember(key(0), row(10), 0, System.nanoTime());
    assertThat(none.slots()).isZero();
    assertThat(none.answer(key(0))).isNull();
  }

  @Test
  void aRowPastItsTimeIsLetGoWhenLookedUp() {
    RecentAnswers answers = RecentAnswers.keptFor(KEPT);
    long aMinuteAgo = System.nanoTime() - Duration.ofMinutes(1).toNanos();
    answers.remember(key(1), row(10), 0, aMinuteAgo); // its 30 seconds are over when it is put
    answers.remember(key(2), row(10), 0, System.nanoTime());
    assertThat(answers.answer(key(1))).as("past its time").isNull();
    assertThat(answers.held()).as("rows held: key 1's was let go").isEqualTo(1);
    assertThat(answers.answer(key(2))).isNotNull();
  }

  /**
   * The bound docs/executor.md gives, measured: the bytes allocated (HotSpot's per-thread counter)
   * to build and keep {@link RecentAnswers#MAX_SLOTS} rows of the largest kept result, with
   * 36-character keys. All of it stays reachable from the table, so this is what a guard holds at
   * most (rows it keeps are rows it read anyway; it keeps them alive for up to 30 seconds).
   */
  @Test
  void measuredBytesAtTheBound() {
    RecentAnswers answers = RecentAnswers.keptFor(KEPT);
    long now = System.nanoTime();
    AllocatedBytes.of(() -> keepLargest(RecentAnswers.keptFor(KEPT), 0, 100, now)); // first use, unmeasured
    long bytes = AllocatedBytes.of(() -> keepLargest(answers, 0, 3 * RecentAnswers.SLOTS, now));
    int kept = 0;
    for (int i = 0; i < 3 * RecentAnswers.SLOTS; i++) {
      kept += answers.answer(longKey(i)) != null ? 1 : 0;
    }
    long perRow = bytes / (3 * RecentAnswers.SLOTS);
    assertThat(answers.held()).as("rows held").isEqualTo(kept);
    System.out.printf("RecentAnswers: %d rows of %d-byte results: %d B per row built and kept, %d rows kept, at most %d B held%n",
        3 * RecentAnswers.SLOTS, RecentAnswers.MAX_RESULT_BYTES, perRow, kept, perRow * RecentAnswers.SLOTS);
    assertThat(answers.slots()).isEqualTo(RecentAnswers.SLOTS);
    assertThat(kept).isLessThanOrEqualTo(RecentAnswers.SLOTS);
    assertThat(perRow * RecentAnswers.SLOTS).as("the bound the docs give: about 11.5 MiB").isLessThan(12L << 20);
  }

  private static void keepLargest(RecentAnswers answers, int from, int to, long now) {
    for (int i = from; i < to; i++) {
      byte[] result = new byte[RecentAnswers.MAX_RESULT_BYTES];
      Arrays.fill(result, (byte) 'x');
      answers.remember(longKey(i), new ClaimRow(false, 0, new byte[32], ClaimTable.COMPLETED, result, Instant.now(),
          Duration.ZERO, null, true, false, Duration.ofHours(1)), 0, now);
    }
  }

  private static IdempotencyKey key(int i) {
    return IdempotencyKey.of("orders", "key-" + i);
  }

  /** A 36-character key (a UUID's length), built with little garbage, so the count is mostly what is kept. */
  private static IdempotencyKey longKey(int i) {
    String digits = Integer.toString(i);
    StringBuilder b = new StringBuilder(36);
    while (b.length() < 36 - digits.length()) {
      b.append('0');
    }
    return IdempotencyKey.of("orders", b.append(digits).toString());
  }

  private static ClaimRow row(int resultBytes) {
    return new ClaimRow(false, 0, new byte[32], ClaimTable.COMPLETED, new byte[resultBytes], Instant.now(),
        Duration.ZERO, null, true, false, Duration.ofHours(1));
  }
}
