package dev.idem.result;

import dev.idem.IdemException;
import java.time.Duration;

/**
 * Thrown by {@link Execution.InFlight#value()}, for callers who prefer an exception to a pattern
 * match, and by calls whose answer has no "in flight" value (a per-entity sequence's {@code
 * applyIfNewer}): the first copy of this intent is still running. Not a failure of the intent:
 * retry after {@link #retryAfter()}.
 */
public class InFlightException extends IdemException {
  private static final long serialVersionUID = 1L;

  private final Duration retryAfter;

  /** {@code key} is in flight; retry after {@code retryAfter}. */
  public InFlightException(String key, Duration retryAfter) {
    super("key " + key + " is in flight: another copy is running; retry after " + retryAfter);
    this.retryAfter = retryAfter;
  }

  /** How long to wait before retrying. */
  public Duration retryAfter() {
    return retryAfter;
  }
}
