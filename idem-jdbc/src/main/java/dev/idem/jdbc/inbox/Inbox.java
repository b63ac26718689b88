package dev.idem.jdbc.inbox;

import dev.idem.jdbc.Idem;

/** STUB: replaced by the issue that builds it. */
public final class Inbox {
  public static Builder builder(Idem idem, String consumer) { return new Builder(); }
  public static final class Builder {}
}
