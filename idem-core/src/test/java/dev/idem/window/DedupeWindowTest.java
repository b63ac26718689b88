package dev.idem.window;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class DedupeWindowTest {

  @Test
  void thePresetsAreTheSeedsTable() {
    assertThat(RepeatSource.CLIENT_RETRY.slowest()).isEqualTo(Duration.ofHours(24));
    assertThat(RepeatSource.MOBILE_OFFLINE_QUEUE.slowest()).isEqualTo(Duration.ofDays(7));
    assertThat(RepeatSource.WEBHOOK_RETRIES.slowest()).isEqualTo(Duration.ofDays(3));
    assertThat(RepeatSource.KAFKA_REPLAY.slowest()).isEqualTo(Duration.ofDays(7));
    assertThat(RepeatSource.DEAD_LETTER_REDRIVE.slowest()).isEqualTo(Duration.ofDays(14));

    assertThat(DedupeWindow.CLIENT_RETRY.length()).isEqualTo(Duration.ofHours(24));
    assertThat(DedupeWindow.MOBILE_OFFLINE_QUEUE.length()).isEqualTo(Duration.ofDays(7));
    assertThat(DedupeWindow.WEBHOOK_RETRIES.length()).isEqualTo(Duration.ofDays(3));
    assertThat(DedupeWindow.KAFKA_REPLAY.length()).isEqualTo(Duration.ofDays(7));
    assertThat(DedupeWindow.DEAD_LETTER_REDRIVE.length()).isEqualTo(Duration.ofDays(14));
  }

  @Test
  void coveringIsTheSlowestDeclaredSource() {
    assertThat(DedupeWindow.covering(RepeatSource.CLIENT_RETRY, RepeatSource.WEBHOOK_RETRIES))
        .isEqualTo(DedupeWindow.of(Duration.ofDays(3)));
    assertThat(DedupeWindow.covering(RepeatSource.WEBHOOK_RETRIES, RepeatSource.DEAD_LETTER_REDRIVE, RepeatSource.KAFKA_REPLAY).length())
        .isEqualTo(Duration.ofDays(14));
    assertThat(DedupeWindow.covering(RepeatSource.CLIENT_RETRY).length()).isEqualTo(Duration.ofHours(24));
    // Sources of your own: a Kafka topic kept 30 days.
    assertThat(DedupeWindow.covering(Duration.ofMinutes(5), Duration.ofDays(30)).length()).isEqualTo(Duration.ofDays(30));
  }

  @Test
  void aWindowShorterThanADeclaredSourceIsRefusedNamingTheSourceItMisses() {
    // A 24-hour key table behind a Stripe webhook: the retry on day 3 would run again.
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ofHours(24), RepeatSource.CLIENT_RETRY, RepeatSource.WEBHOOK_RETRIES))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("dedupe window of 1 day is shorter than the slowest path a repeat can take:"
            + " WEBHOOK_RETRIES arrives up to 3 days late, 2 days past the window;"
            + " a copy arriving after the window runs again");
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ofDays(5), RepeatSource.KAFKA_REPLAY, RepeatSource.DEAD_LETTER_REDRIVE))
        .hasMessage("dedupe window of 5 days is shorter than the slowest path a repeat can take:"
            + " KAFKA_REPLAY arrives up to 7 days late, 2 days past the window;"
            + " DEAD_LETTER_REDRIVE arrives up to 14 days late, 9 days past the window;"
            + " a copy arriving after the window runs again");
  }

  @Test
  void aWindowAsLongAsTheSlowestSourceIsAccepted() {
    assertThat(DedupeWindow.of(Duration.ofDays(3), RepeatSource.WEBHOOK_RETRIES).length()).isEqualTo(Duration.ofDays(3));
    assertThat(DedupeWindow.of(Duration.ofDays(15), RepeatSource.values()).length()).isEqualTo(Duration.ofDays(15));
    assertThat(DedupeWindow.of(Duration.ofHours(1)).length()).isEqualTo(Duration.ofHours(1)); // nothing declared
  }

  @Test
  void shortOfListsTheMissedSourcesForACallerThatWarns() {
    DedupeWindow day = DedupeWindow.of(Duration.ofDays(1));
    assertThat(day.shortOf(RepeatSource.values()))
        .containsExactly(RepeatSource.MOBILE_OFFLINE_QUEUE, RepeatSource.WEBHOOK_RETRIES,
            RepeatSource.KAFKA_REPLAY, RepeatSource.DEAD_LETTER_REDRIVE);
    assertThat(DedupeWindow.DEAD_LETTER_REDRIVE.shortOf(RepeatSource.values())).isEmpty();
    assertThatThrownBy(() -> day.shortOf(RepeatSource.values()).clear()).isInstanceOf(UnsupportedOperationException.class);
  }

  @Test
  void fractionUsedIsAgeOverWindowAndNearEndStartsAtFourFifths() {
    DedupeWindow window = DedupeWindow.WEBHOOK_RETRIES; // 3 days
    assertThat(window.fractionUsed(Duration.ZERO)).isZero();
    assertThat(window.fractionUsed(Duration.ofSeconds(36))).isCloseTo(36.0 / 259_200, within(1e-12));
    assertThat(window.fractionUsed(Duration.ofHours(36))).isEqualTo(0.5);
    assertThat(window.isNearEnd(Duration.ofHours(36))).isFalse();
    // A repeat caught on day 2.5 of a 3-day window: the next one may arrive after the key is gone.
    assertThat(window.fractionUsed(Duration.ofHours(60))).isCloseTo(0.8333, within(1e-4));
    assertThat(window.isNearEnd(Duration.ofHours(60))).isTrue();
    assertThat(window.isNearEnd(Duration.ofMillis((long) (259_200_000 * DedupeWindow.NEAR_END)))).isTrue(); // at the mark
    assertThat(window.isNearEnd(Duration.ofMillis((long) (259_200_000 * DedupeWindow.NEAR_END) - 1))).isFalse();
    assertThat(window.fractionUsed(Duration.ofDays(4))).isGreaterThan(1.0); // caught past the window
  }

  @Test
  void fractionUsedDoesNotOverflowForVeryLongWindows() {
    DedupeWindow forever = DedupeWindow.of(Duration.ofDays(365L * 1000));
    assertThat(forever.fractionUsed(Duration.ofDays(365L * 500))).isEqualTo(0.5);
  }

  @Test
  void badInputIsRefusedNamingIt() {
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("dedupe window length must be positive, was PT0S");
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ofNanos(500))).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("dedupe window length must be at least PT0.001S, was PT0.0000005S");
    assertThat(DedupeWindow.of(DedupeWindow.MIN_LENGTH).length()).isEqualTo(Duration.ofMillis(1));
    assertThatThrownBy(() -> DedupeWindow.of(null)).hasMessage("dedupe window length must not be null");
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ofDays(-1), RepeatSource.KAFKA_REPLAY))
        .hasMessage("dedupe window length must be positive, was PT-24H");
    assertThatThrownBy(() -> DedupeWindow.of(Duration.ofDays(1), RepeatSource.KAFKA_REPLAY, null))
        .hasMessage("repeat source must not be null");
    assertThatThrownBy(() -> DedupeWindow.covering(new Duration[0])).hasMessage("declare at least one path");
    assertThatThrownBy(() -> DedupeWindow.covering(Duration.ofDays(1), Duration.ZERO))
        .hasMessage("path lateness must be positive, was PT0S");
    assertThatThrownBy(() -> DedupeWindow.WEBHOOK_RETRIES.fractionUsed(Duration.ofSeconds(-1)))
        .hasMessage("age must not be negative, was PT-1S");
  }

  @Test
  void durationsPrintAsPeopleReadThem() {
    assertThat(DedupeWindow.describe(Duration.ofDays(3))).isEqualTo("3 days");
    assertThat(DedupeWindow.describe(Duration.ofHours(24))).isEqualTo("1 day");
    assertThat(DedupeWindow.describe(Duration.ofHours(54).plusMinutes(1))).isEqualTo("2 days 6 hours 1 minute");
    assertThat(DedupeWindow.describe(Duration.ofMillis(1500))).isEqualTo("1 second 500 milliseconds");
    assertThat(DedupeWindow.WEBHOOK_RETRIES).hasToString("DedupeWindow[3 days]");
  }
}
