package dev.idem.jdbc.internal;

/**
 * Thrown inside a guard's transaction to roll it back and say how the claim went (taken by another
 * copy, or held past the wait), never to report an error: the guard that threw it catches it and
 * answers the call. Carries no stack trace. Never leaves idem. Not an API.
 */
public abstract class ClaimSignal extends RuntimeException {
  private static final long serialVersionUID = 1L;

  protected ClaimSignal(String what) {
    super(what, null, false, false);
  }
}
