package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.ClaimSignal;
import java.time.Duration;

/**
 * Thrown inside a claim that found another copy running, to roll the claim back (the owned
 * transaction, or the joined call's savepoint); caught by the engine and answered as {@link
 * dev.idem.result.Execution.InFlight}. Never leaves the engine.
 */
public final class Busy extends ClaimSignal {
  private static final long serialVersionUID = 1L;

  public final transient Duration retryAfter;

  public Busy(Duration retryAfter) {
    super("in flight");
    this.retryAfter = retryAfter;
  }
}
