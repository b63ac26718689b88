package dev.idem.jdbc.executor;

import dev.idem.jdbc.Idem;

/** STUB: replaced by the issue that builds it. */
public final class IdempotentExecutor {
  public static Builder builder(Idem idem) { return new Builder(); }
  public static final class Builder {}
}
