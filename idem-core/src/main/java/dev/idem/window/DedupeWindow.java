package dev.idem.window;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * How long a key (or an inbox message id) is remembered. A copy that arrives after its key
 * expired is not recognised and runs again, so the rule is: window &gt; the longest gap between the
 * first copy and the last.
 *
 * <p>Guarantees: {@link #covering(RepeatSource, RepeatSource...)} is as long as the slowest declared
 * source; {@link #of(Duration, RepeatSource...)} refuses a window shorter than any declared source,
 * naming it. {@link #fractionUsed} is the signal to watch: repeats caught near the end of the window
 * predict repeats that arrive after it.
 *
 * <p>Does not guarantee: that the declared sources are all the paths. A backfill after a bug fix
 * reaches as far back as you replay; send such paths through a check that does not depend on a
 * window (a key that lives with the entity, a per-entity sequence, reconciliation).
 *
 * @param length how long a key is remembered after it is first claimed
 */
public record DedupeWindow(Duration length) {

  /**
   * The shortest window: 1 millisecond. A database keeps times to the microsecond, so a window under
   * one would be stored as zero, and one this short already forgets a key before any repeat can
   * arrive; the floor only keeps a typo (nanos for millis) from passing as a window. Declared
   * first: the presets below are checked against it as they are built.
   */
  public static final Duration MIN_LENGTH = Duration.ofMillis(1);

  /** Covers {@link RepeatSource#CLIENT_RETRY}: 24 hours, online API retries. */
  public static final DedupeWindow CLIENT_RETRY = covering(RepeatSource.CLIENT_RETRY);

  /** Covers {@link RepeatSource#MOBILE_OFFLINE_QUEUE}: 7 days. */
  public static final DedupeWindow MOBILE_OFFLINE_QUEUE = covering(RepeatSource.MOBILE_OFFLINE_QUEUE);

  /** Covers {@link RepeatSource#WEBHOOK_RETRIES}: 3 days, Stripe's live-mode retry schedule. */
  public static final DedupeWindow WEBHOOK_RETRIES = covering(RepeatSource.WEBHOOK_RETRIES);

  /** Covers {@link RepeatSource#KAFKA_REPLAY}: 7 days, Kafka's default retention. */
  public static final DedupeWindow KAFKA_REPLAY = covering(RepeatSource.KAFKA_REPLAY);

  /** Covers {@link RepeatSource#DEAD_LETTER_REDRIVE}: 14 days, the longest SQS DLQ retention. */
  public static final DedupeWindow DEAD_LETTER_REDRIVE = covering(RepeatSource.DEAD_LETTER_REDRIVE);

  /** {@link #fractionUsed} at or above this is "near the end of the window". */
  public static final double NEAR_END = 0.8;

  public DedupeWindow {
    Require.positive(length, "dedupe window length");
    if (length.compareTo(MIN_LENGTH) < 0) {
      throw new IllegalArgumentException("dedupe window length must be at least " + MIN_LENGTH + ", was " + length);
    }
  }

  /** A window of the given length, with no declared sources to check. */
  public static DedupeWindow of(Duration length) {
    return new DedupeWindow(length);
  }

  /**
   * A window of the given length that must cover every declared source.
   *
   * @throws IllegalArgumentException if it is shorter than one of them; the message names each
   *     source it misses and by how much
   */
  public static DedupeWindow of(Duration length, RepeatSource... declared) {
    DedupeWindow window = new DedupeWindow(length);
    List<RepeatSource> missed = window.shortOf(declared);
    if (!missed.isEmpty()) {
      StringBuilder why = new StringBuilder("dedupe window of " + describe(length)
          + " is shorter than the slowest path a repeat can take:");
      for (RepeatSource source : missed) {
        why.append(' ').append(source).append(" arrives up to ").append(describe(source.slowest()))
            .append(" late, ").append(describe(source.slowest().minus(length))).append(" past the window;");
      }
      why.append(" a copy arriving after the window runs again");
      throw new IllegalArgumentException(why.toString());
    }
    return window;
  }

  /** The shortest window that covers every declared source: the slowest of them. */
  public static DedupeWindow covering(RepeatSource first, RepeatSource... more) {
    Require.notNull(first, "repeat source");
    Duration longest = first.slowest();
    for (RepeatSource source : Require.notNull(more, "repeat sources")) {
      Require.notNull(source, "repeat source");
      if (source.slowest().compareTo(longest) > 0) {
        longest = source.slowest();
      }
    }
    return new DedupeWindow(longest);
  }

  /** The shortest window that covers paths of the given lateness, for sources of your own. */
  public static DedupeWindow covering(Duration... slowestPaths) {
    if (slowestPaths == null || slowestPaths.length == 0) {
      throw new IllegalArgumentException("declare at least one path");
    }
    Duration longest = Duration.ZERO;
    for (Duration path : slowestPaths) {
      Require.positive(path, "path lateness");
      if (path.compareTo(longest) > 0) {
        longest = path;
      }
    }
    return new DedupeWindow(longest);
  }

  /**
   * The declared sources this window is too short for, for a caller that warns instead of refusing;
   * an unmodifiable list, empty if it covers them all.
   */
  public List<RepeatSource> shortOf(RepeatSource... declared) {
    List<RepeatSource> missed = new ArrayList<>();
    for (RepeatSource source : Require.notNull(declared, "repeat sources")) {
      Require.notNull(source, "repeat source");
      if (length.compareTo(source.slowest()) < 0) {
        missed.add(source);
      }
    }
    return List.copyOf(missed);
  }

  /**
   * How much of the window a repeat had used when it was caught: its age divided by the window.
   * 0.1 is a fast retry; 0.9 is a warning that copies later than this one are being missed.
   */
  public double fractionUsed(Duration age) {
    Require.notNegative(age, "age");
    // Seconds as doubles, not nanos as longs: Duration.toNanos() overflows past 292 years.
    return seconds(age) / seconds(length);
  }

  private static double seconds(Duration d) {
    return d.getSeconds() + d.getNano() / 1e9;
  }

  /** A duration as people read it: "3 days", "24 hours", "90 seconds", "2 days 6 hours". */
  static String describe(Duration d) {
    if (d.isZero()) {
      return "0 seconds";
    }
    StringBuilder out = new StringBuilder();
    long days = d.toDays();
    int hours = d.toHoursPart();
    int minutes = d.toMinutesPart();
    int secs = d.toSecondsPart();
    int millis = d.toMillisPart();
    unit(out, days, "day");
    unit(out, hours, "hour");
    unit(out, minutes, "minute");
    unit(out, secs, "second");
    unit(out, millis, "millisecond");
    return out.length() == 0 ? d.toString() : out.toString();
  }

  private static void unit(StringBuilder out, long n, String name) {
    if (n != 0) {
      out.append(out.length() == 0 ? "" : " ").append(n).append(' ').append(name).append(n == 1 ? "" : "s");
    }
  }

  @Override
  public String toString() {
    return "DedupeWindow[" + describe(length) + "]";
  }

  /** Whether a repeat of this age was caught near the end of the window ({@value #NEAR_END} or more). */
  public boolean isNearEnd(Duration age) {
    return fractionUsed(age) >= NEAR_END;
  }
}
