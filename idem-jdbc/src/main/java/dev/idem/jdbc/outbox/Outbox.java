package dev.idem.jdbc.outbox;

import dev.idem.jdbc.Idem;

/** STUB: replaced by the issue that builds it. */
public final class Outbox {
  public static Outbox of(Idem idem) { return new Outbox(); }
}
