package dev.idem.result;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.time.Instant;

/**
 * What one call for an intent key got: the effect ran now ({@link Applied}), it had run before and
 * this is the stored first result ({@link Replayed}), or the first copy is still running ({@link
 * InFlight}). A recognised repeat is a normal value, never an exception; a key reused with a
 * different request is not a repeat and is refused with {@link dev.idem.key.KeyReuseException}.
 *
 * <p>Does not guarantee: that a replayed value is the same object the first call returned. It is
 * what the {@link Codec} decodes from the stored bytes; with {@link Codec#none()} a replay carries
 * {@code null}.
 *
 * @param <T> the result type, stored and replayed through a {@link Codec}
 */
public sealed interface Execution<T> permits Execution.Applied, Execution.Replayed, Execution.InFlight {

  /**
   * The result: this call's, or the stored first one.
   *
   * @throws InFlightException for {@link InFlight}, which has no result yet
   */
  T value();

  /** Whether the effect ran in this call. */
  default boolean applied() {
    return this instanceof Applied;
  }

  /** Whether this is the stored result of an earlier call. */
  default boolean replayed() {
    return this instanceof Replayed;
  }

  /** Whether the first copy is still running and the caller should retry later. */
  default boolean inFlight() {
    return this instanceof InFlight;
  }

  /**
   * The effect ran in this call and its result was stored with it.
   *
   * @param value this call's result; {@code null} when the effect returned none
   */
  record Applied<T>(T value) implements Execution<T> {}

  /**
   * The effect had run before; this is its stored result, replayed.
   *
   * @param value the first call's result, decoded
   * @param firstCompletedAt when the first call completed, by the store's clock
   * @param age how long after that this repeat was caught; never negative
   */
  record Replayed<T>(T value, Instant firstCompletedAt, Duration age) implements Execution<T> {
    public Replayed {
      Require.notNull(firstCompletedAt, "firstCompletedAt");
      Require.notNegative(age, "age");
    }
  }

  /**
   * Another copy holds the key and has not finished: retry after {@code retryAfter} (over HTTP,
   * 409 with {@code Retry-After}). A later retry gets the replay, or runs if the first copy failed.
   */
  record InFlight<T>(String key, Duration retryAfter) implements Execution<T> {
    public InFlight {
      Require.notNull(key, "key");
      Require.notNegative(retryAfter, "retryAfter");
    }

    @Override
    public T value() {
      throw new InFlightException(key, retryAfter);
    }
  }
}
