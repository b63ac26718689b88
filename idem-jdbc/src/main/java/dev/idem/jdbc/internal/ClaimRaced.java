package dev.idem.jdbc.internal;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.TxCallback;
import org.jooq.exception.DataAccessException;

/**
 * Thrown inside a guard's own transaction when its claim statement, run before any of the
 * caller's code, failed with a serialization failure or deadlock (40001 / 40P01): at REPEATABLE
 * READ or SERIALIZABLE, the claim waited for another copy's write to the same row, which then
 * committed. {@link #rerun} runs the transaction again, not counting it against {@link
 * Idem.Builder#serializationRetries}, which are for failures after the caller's code ran: each
 * such failure means another copy's claim committed, so the runs make progress, and a copy that
 * lost to several racers in turn is not failed for it. Not an API.
 */
public final class ClaimRaced extends ClaimSignal {
  private static final long serialVersionUID = 1L;

  private final transient DataAccessException failure;

  public ClaimRaced(DataAccessException failure) {
    super("claim raced");
    this.failure = failure;
  }

  /**
   * What a claim statement's {@code failure} becomes: in idem's own transaction ({@code owned}), a
   * serialization failure or deadlock is a lost race, to run again; anything else, or in the
   * caller's transaction, the failure itself.
   */
  public static RuntimeException orFailure(boolean owned, DataAccessException failure) {
    return owned && SqlStates.isRetryable(failure) ? new ClaimRaced(failure) : failure;
  }

  /**
   * {@link Idem#inTransaction}, run again while its claim raced, at most {@link
   * AutoCommit#SERIALIZATION_ATTEMPTS} times in all; then the last race's failure is thrown.
   */
  public static <T, X extends Exception> T rerun(Idem idem, TxCallback<T, X> work) throws X {
    for (int attempt = 1; ; attempt++) {
      try {
        return idem.inTransaction(work);
      } catch (ClaimRaced raced) {
        if (attempt >= AutoCommit.SERIALIZATION_ATTEMPTS) {
          throw raced.failure;
        }
      }
    }
  }
}
