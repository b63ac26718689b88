package dev.idem.internal.base;

import java.time.Duration;

/** Argument checks whose messages name the argument and what was wrong. Not an API. */
public final class Require {
  private Require() {}

  public static <T> T notNull(T value, String name) {
    if (value == null) {
      throw new IllegalArgumentException(name + " must not be null");
    }
    return value;
  }

  public static Duration positive(Duration value, String name) {
    notNull(value, name);
    if (value.isNegative() || value.isZero()) {
      throw new IllegalArgumentException(name + " must be positive, was " + value);
    }
    return value;
  }

  public static Duration notNegative(Duration value, String name) {
    notNull(value, name);
    if (value.isNegative()) {
      throw new IllegalArgumentException(name + " must not be negative, was " + value);
    }
    return value;
  }

  /**
   * @param why what sets the limit, for the message, e.g. {@code "PostgreSQL's lock_timeout"}
   */
  public static Duration atMost(Duration value, Duration max, String name, String why) {
    notNull(value, name);
    if (value.compareTo(max) > 0) {
      throw new IllegalArgumentException(name + " must be at most " + readable(max) + " (" + why + "), was " + value);
    }
    return value;
  }

  /** Whole days as "1 day" or "365 days", anything else as {@link Duration#toString()}. */
  private static String readable(Duration d) {
    if (d.isZero() || !d.equals(Duration.ofDays(d.toDays()))) {
      return d.toString();
    }
    return d.toDays() + (d.toDays() == 1 ? " day" : " days");
  }

  public static int positive(int value, String name) {
    if (value <= 0) {
      throw new IllegalArgumentException(name + " must be positive, was " + value);
    }
    return value;
  }

  public static String notBlank(String value, String name) {
    notNull(value, name);
    if (value.isBlank()) {
      throw new IllegalArgumentException(name + " must not be blank");
    }
    return value;
  }
}
