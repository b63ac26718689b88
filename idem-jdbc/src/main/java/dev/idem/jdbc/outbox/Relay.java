package dev.idem.jdbc.outbox;

import dev.idem.jdbc.Idem;

/** STUB: replaced by the issue that builds it. */
public final class Relay {
  public static Builder builder(Idem idem, Publisher publisher) { return new Builder(); }
  public static final class Builder {}
}
