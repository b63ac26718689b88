package dev.idem.internal;

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
