package dev.idem.http.client;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.format.DateTimeParseException;
import java.time.format.ResolverStyle;
import java.time.format.TextStyle;
import java.time.temporal.ChronoField;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * Reads a {@code Retry-After} field value (RFC 9110, section 10.2.3): delta-seconds, or an
 * HTTP-date in any of the three forms a recipient must accept (IMF-fixdate, and the obsolete RFC
 * 850 and asctime forms).
 */
final class RetryAfter {
  /** Longer than any wait a policy honours; what a delta too big for a long reads as. */
  static final Duration FOREVER = Duration.ofDays(365_000);

  private static final Map<Long, String> DAYS = Map.of(
      1L, "Monday", 2L, "Tuesday", 3L, "Wednesday", 4L, "Thursday", 5L, "Friday", 6L, "Saturday", 7L, "Sunday");

  /** Sun, 06 Nov 1994 08:49:37 GMT (the JDK's RFC 1123 form also takes a one-digit day). */
  private static final DateTimeFormatter IMF_FIXDATE = DateTimeFormatter.RFC_1123_DATE_TIME;

  /** Sunday, 06-Nov-94 08:49:37 GMT. */
  private static final DateTimeFormatter RFC_850 = new DateTimeFormatterBuilder()
      .appendText(ChronoField.DAY_OF_WEEK, DAYS)
      .appendLiteral(", ")
      .appendValue(ChronoField.DAY_OF_MONTH, 2)
      .appendLiteral('-')
      .appendText(ChronoField.MONTH_OF_YEAR, TextStyle.SHORT)
      .appendLiteral('-')
      // RFC 9110: a two-digit year more than 50 years in the future is the past century's.
      .appendValueReduced(ChronoField.YEAR, 2, 2, LocalDate.now(ZoneOffset.UTC).minusYears(49))
      .appendLiteral(' ')
      .appendPattern("HH:mm:ss")
      .appendLiteral(" GMT")
      .toFormatter(Locale.US)
      .withZone(ZoneOffset.UTC)
      .withResolverStyle(ResolverStyle.SMART);

  /** Sun Nov  6 08:49:37 1994. */
  private static final DateTimeFormatter ASCTIME = new DateTimeFormatterBuilder()
      .appendPattern("EEE MMM ppd HH:mm:ss yyyy")
      .toFormatter(Locale.US)
      .withZone(ZoneOffset.UTC);

  private RetryAfter() {}

  /**
   * The wait a {@code Retry-After} value asks for, counted from {@code now} for a date (a date in
   * the past asks for no wait).
   *
   * @return empty when the value is null, blank or neither form (it is then ignored, and the
   *     policy's back-off applies); {@link #FOREVER} for delta-seconds too large to count
   */
  static Optional<Duration> parse(String value, Instant now) {
    if (value == null) {
      return Optional.empty();
    }
    String v = value.trim();
    if (v.isEmpty()) {
      return Optional.empty();
    }
    if (v.chars().allMatch(c -> c >= '0' && c <= '9')) {
      if (v.length() > 15) {
        return Optional.of(FOREVER);
      }
      long seconds = Long.parseLong(v);
      return Optional.of(seconds > FOREVER.getSeconds() ? FOREVER : Duration.ofSeconds(seconds));
    }
    return date(v).map(at -> at.isAfter(now) ? Duration.between(now, at) : Duration.ZERO);
  }

  private static Optional<Instant> date(String v) {
    for (DateTimeFormatter f : new DateTimeFormatter[] {IMF_FIXDATE, RFC_850, ASCTIME}) {
      try {
        ZonedDateTime t = ZonedDateTime.parse(v, f);
        return Optional.of(t.toInstant());
      } catch (DateTimeParseException e) {
        // try the next form
      }
    }
    return Optional.empty();
  }
}
