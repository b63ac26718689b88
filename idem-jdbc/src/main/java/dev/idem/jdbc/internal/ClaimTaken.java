package dev.idem.jdbc.internal;

/**
 * Thrown inside a {@link dev.idem.jdbc.ClaimOrder#AT_COMMIT} transaction whose claim row (a key,
 * an inbox message id) conflicted with another copy's at commit, to roll the whole transaction
 * back, effect included. The guard that threw it catches it and answers the call the way a claim
 * made before the effect would be answered. Never leaves idem.
 */
public final class ClaimTaken extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public ClaimTaken() {
    super("claim taken", null, false, false);
  }
}
