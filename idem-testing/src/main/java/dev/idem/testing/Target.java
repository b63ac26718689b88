package dev.idem.testing;

import java.time.Duration;

/**
 * Where {@link Repeats} delivers copies: your HTTP endpoint, your message handler, your Kafka
 * consumer ({@link Targets}, {@link KafkaTarget}), or anything else that takes one attempt at a
 * copy and says whether a real client or broker would deliver it again.
 *
 * <p>{@link #send} makes one attempt. {@link Repeats} makes the next ones, with the same copy (so
 * the same key), while the answer asks for it, at most {@link Repeats#attempts} times within
 * {@link Repeats#timeout}. An exception from {@code send} is an outcome unknown to the sender, so
 * it is delivered again too.
 */
@FunctionalInterface
public interface Target {
  /**
   * Makes one attempt at delivering {@code copy}; returns once it is over (the reply came, the
   * message was acknowledged or is known not to be). Must return within {@link Repeats#timeout}:
   * a copy still running then is abandoned and reported as such.
   */
  Attempt send(Copy copy) throws Exception;

  /**
   * What one attempt came to.
   *
   * @param outcome what happened, as the report shows it: {@code "201"}, {@code "acknowledged"},
   *     {@code "500"}
   * @param again whether a real client or broker would deliver the copy again (a 5xx, an
   *     unacknowledged message)
   * @param retryAfter how long the receiver asked the sender to wait before delivering again (an
   *     HTTP {@code Retry-After}); {@link Duration#ZERO} for the sender's own back-off
   */
  record Attempt(String outcome, boolean again, Duration retryAfter) {
    /** Checks the outcome is there and the wait is not negative. */
    public Attempt {
      if (outcome == null || outcome.isBlank()) {
        throw new IllegalArgumentException("an attempt needs an outcome to report");
      }
      if (retryAfter == null || retryAfter.isNegative()) {
        throw new IllegalArgumentException("retryAfter must be zero or positive, was " + retryAfter);
      }
    }

    /** A final answer: the sender stops here. */
    public static Attempt done(String outcome) {
      return new Attempt(outcome, false, Duration.ZERO);
    }

    /** An answer after which the sender delivers the same copy again, after its own back-off. */
    public static Attempt again(String outcome) {
      return new Attempt(outcome, true, Duration.ZERO);
    }

    /**
     * An HTTP response as a client that retries safely reads it: a 5xx, 409 (a copy in flight) or
     * 425 is sent again with the same key, after {@code retryAfter} (the response's {@code
     * Retry-After} header in seconds, or null) when it has one; any other status is final.
     *
     * @param outcome what the report shows, e.g. {@code "201"} or {@code "409 in flight"}
     */
    public static Attempt ofHttp(int status, String retryAfter, String outcome) {
      boolean again = status >= 500 || status == 409 || status == 425;
      return new Attempt(outcome, again, again ? seconds(retryAfter) : Duration.ZERO);
    }

    /** {@code Retry-After} in delta-seconds; zero when absent or not a number (an HTTP date is not honoured). */
    private static Duration seconds(String header) {
      if (header == null) {
        return Duration.ZERO;
      }
      try {
        return Duration.ofSeconds(Math.max(0, Long.parseLong(header.trim())));
      } catch (NumberFormatException e) {
        return Duration.ZERO;
      }
    }
  }
}
