package dev.idem.jdbc.transition;

import dev.idem.jdbc.Idem;

/** STUB: replaced by the issue that builds it. */
public final class Transitions {
  public static Builder builder(Idem idem, String table) { return new Builder(); }
  public static final class Builder {}
}
