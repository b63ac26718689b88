package dev.idem.http.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class RetryAfterTest {
  static final Instant NOW = Instant.parse("1994-11-06T08:49:30Z");

  @Test
  void deltaSeconds() {
    assertThat(RetryAfter.parse("120", NOW)).hasValue(Duration.ofSeconds(120));
    assertThat(RetryAfter.parse(" 0 ", NOW)).hasValue(Duration.ZERO);
    assertThat(RetryAfter.parse("99999999999999999999", NOW)).hasValue(RetryAfter.FOREVER);
  }

  @Test
  void theThreeHttpDateForms() {
    Duration seven = Duration.ofSeconds(7);
    assertThat(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", NOW)).hasValue(seven);
    assertThat(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", NOW)).hasValue(seven);
    assertThat(RetryAfter.parse("Sun Nov  6 08:49:37 1994", NOW)).hasValue(seven);
  }

  @Test
  void aDateInThePastAsksForNoWait() {
    assertThat(RetryAfter.parse("Sun, 06 Nov 1994 08:49:00 GMT", NOW)).hasValue(Duration.ZERO);
  }

  @Test
  void anythingElseIsIgnored() {
    for (String v : new String[] {null, "", "  ", "-1", "1.5", "soon", "Sun, 06 Nov 1994", "Mon, 06 Nov 1994 08:49:37 GMT"}) {
      assertThat(RetryAfter.parse(v, NOW)).as("%s", v).isEmpty();
    }
  }
}
