package dev.idem.jdbc.internal;

import java.sql.SQLException;

/** Classifies PostgreSQL errors by SQLSTATE, looking through wrapping exceptions. Not an API. */
public final class SqlStates {
  public static final String SERIALIZATION_FAILURE = "40001";
  public static final String DEADLOCK_DETECTED = "40P01";
  public static final String UNIQUE_VIOLATION = "23505";
  public static final String LOCK_NOT_AVAILABLE = "55P03";
  public static final String QUERY_CANCELED = "57014";

  private SqlStates() {}

  /** The first SQLSTATE in {@code t}'s cause chain, or null. */
  public static String of(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
      if (c.getCause() == c) {
        break;
      }
    }
    return null;
  }

  /** 40001 or 40P01: the transaction may succeed if run again from the start. */
  public static boolean isRetryable(Throwable t) {
    String state = of(t);
    return SERIALIZATION_FAILURE.equals(state) || DEADLOCK_DETECTED.equals(state);
  }

  public static boolean is(Throwable t, String state) {
    return state.equals(of(t));
  }
}
