package dev.idem.testing;

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
   */
  record Attempt(String outcome, boolean again) {
    /** Checks the outcome is there. */
    public Attempt {
      if (outcome == null || outcome.isBlank()) {
        throw new IllegalArgumentException("an attempt needs an outcome to report");
      }
    }

    /** A final answer: the sender stops here. */
    public static Attempt done(String outcome) {
      return new Attempt(outcome, false);
    }

    /** An answer after which the sender delivers the same copy again. */
    public static Attempt again(String outcome) {
      return new Attempt(outcome, true);
    }
  }
}
