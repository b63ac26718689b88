package dev.idem.jdbc.internal;

/**
 * Thrown inside a {@link dev.idem.jdbc.ClaimOrder#AT_COMMIT} transaction whose claim row (a key,
 * an inbox message id) conflicted with another copy's at commit, to roll the whole transaction
 * back, effect included; {@link AtCommit} then answers the call the way a claim made before the
 * effect would be answered. Not an API.
 */
public final class ClaimTaken extends ClaimSignal {
  private static final long serialVersionUID = 1L;

  public ClaimTaken() {
    super("claim taken");
  }
}
