package dev.idem.window;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.Arrays;
import java.util.Set;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;

/** The window check over any window length and any set of declared sources. */
class DedupeWindowPropertyTest {

  @Property(tries = 500)
  void aWindowIsAcceptedExactlyWhenItCoversTheSlowestDeclaredSource(
      @ForAll @LongRange(min = 1, max = 30 * 24) long hours, @ForAll @Size(min = 1) Set<RepeatSource> declared) {
    Duration length = Duration.ofHours(hours);
    RepeatSource[] sources = declared.toArray(RepeatSource[]::new);
    Duration slowest = Arrays.stream(sources).map(RepeatSource::slowest).max(Duration::compareTo).orElseThrow();
    assertThat(DedupeWindow.covering(sources[0], Arrays.copyOfRange(sources, 1, sources.length)).length()).isEqualTo(slowest);
    if (length.compareTo(slowest) >= 0) {
      assertThat(DedupeWindow.of(length, sources).length()).isEqualTo(length);
      assertThat(DedupeWindow.of(length).shortOf(sources)).isEmpty();
    } else {
      assertThatThrownBy(() -> DedupeWindow.of(length, sources))
          .isInstanceOf(IllegalArgumentException.class)
          .satisfies(e -> {
            for (RepeatSource missed : DedupeWindow.of(length).shortOf(sources)) {
              assertThat(e.getMessage()).contains(missed.name());
            }
          });
      assertThat(DedupeWindow.of(length).shortOf(sources)).isNotEmpty()
          .allSatisfy(s -> assertThat(s.slowest()).isGreaterThan(length));
    }
  }

  @Property(tries = 300)
  void fractionUsedGrowsWithAge(@ForAll @LongRange(min = 1, max = 1_000_000) long windowSeconds,
      @ForAll @LongRange(min = 0, max = 2_000_000) long a, @ForAll @LongRange(min = 0, max = 2_000_000) long b) {
    DedupeWindow window = DedupeWindow.of(Duration.ofSeconds(windowSeconds));
    double fa = window.fractionUsed(Duration.ofSeconds(a));
    double fb = window.fractionUsed(Duration.ofSeconds(b));
    assertThat(Long.compare(a, b)).isEqualTo(Double.compare(fa, fb));
    assertThat(window.isNearEnd(Duration.ofSeconds(a))).isEqualTo(fa >= DedupeWindow.NEAR_END);
  }
}
