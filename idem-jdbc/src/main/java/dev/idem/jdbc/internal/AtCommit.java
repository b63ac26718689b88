package dev.idem.jdbc.internal;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.TxCallback;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The control flow of {@link dev.idem.jdbc.ClaimOrder#AT_COMMIT}, one for the executor and the
 * inbox: the effect, then the claim row with {@code COMMIT}, in a transaction of its own; then
 * what to answer when that did not commit. Not an API.
 */
public final class AtCommit {
  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.claims");

  private AtCommit() {}

  /** The call made again with the claim before the effect, after the claim row conflicted. */
  @FunctionalInterface
  public interface ClaimFirst<T, X extends Exception> {
    T run() throws X;
  }

  /**
   * After the effect (or the commit) failed: the answer to a repeat if the claim row shows that a
   * copy completed first, or null if it does not (then the failure is thrown as it was). It may
   * throw its own answer instead (the key reused, a copy in flight); a read that fails is
   * attached to {@code failure} and answers null.
   */
  @FunctionalInterface
  public interface RepeatAnswer<T> {
    T after(Throwable failure);
  }

  /**
   * Runs {@code effectThenClaim} in a transaction; if its claim row conflicted ({@link
   * ClaimTaken}), runs {@code claimFirst}; if it failed otherwise, asks {@code repeat} whether it
   * was a repeat, and answers that or throws the failure unchanged. A {@link ClaimSignal}, an
   * {@link InterruptedException} and a {@link VirtualMachineError} are passed on without asking.
   *
   * @param what names the guard and key in the debug log line of a failure answered as a repeat;
   *     built only when that line is written, so the hot path makes no string
   */
  public static <T, X extends Exception> T run(Idem idem, TxCallback<T, X> effectThenClaim, ClaimFirst<T, X> claimFirst,
      RepeatAnswer<T> repeat, Supplier<String> what) throws X {
    try {
      return idem.inTransaction(effectThenClaim);
    } catch (ClaimTaken taken) {
      return claimFirst.run();
    } catch (Throwable failure) {
      if (failure instanceof ClaimSignal || failure instanceof InterruptedException || failure instanceof VirtualMachineError) {
        throw failure;
      }
      T answer;
      try {
        answer = repeat.after(failure);
      } catch (RuntimeException answered) {
        logAnswered(what, failure);
        throw answered;
      }
      if (answer == null) {
        throw failure;
      }
      // The failure was a symptom of the repeat (the first copy's rows were there); it is not
      // the caller's to handle, but whoever debugs the callback may want to see it.
      logAnswered(what, failure);
      return answer;
    }
  }

  private static void logAnswered(Supplier<String> what, Throwable failure) {
    if (LOG.isDebugEnabled()) {
      LOG.debug(what.get() + ": the effect of a copy failed and the claim row answered it"
          + " (a copy completed or holds the claim); the failure is not thrown", failure);
    }
  }
}
