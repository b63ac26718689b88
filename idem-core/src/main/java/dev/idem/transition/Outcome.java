package dev.idem.transition;

/**
 * What a conditional step did. Zero rows matched is not one answer but two, and callers must hear
 * which: {@link #ALREADY_DONE} is a success (ack the message, stop retrying), {@link #CONFLICT} is
 * not (retry later, refund, alert).
 */
public enum Outcome {
  /** This call made the change. */
  APPLIED,
  /** A repeat or a late event: the change happened before. Treat as success. */
  ALREADY_DONE,
  /** The row is somewhere this step does not lead (a side state, or a step not yet reached). */
  CONFLICT;

  /** True for {@link #APPLIED} and {@link #ALREADY_DONE}: the caller may ack and stop retrying. */
  public boolean isSuccess() {
    return this != CONFLICT;
  }
}
