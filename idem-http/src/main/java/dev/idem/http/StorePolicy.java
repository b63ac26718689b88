package dev.idem.http;

import java.util.Arrays;
import java.util.function.IntPredicate;

/**
 * Which statuses a guarded handler may answer with and have that answer stored with the key,
 * committed with the handler's writes and replayed to every repeat. Any other answer rolls the
 * transaction back (the handler's writes and the key), so the key is free again, and is still sent
 * to the client, this once.
 *
 * <p>Stripe stores every answer once its endpoint began, 500s included, because its effects are
 * not undone when an endpoint fails half-way: replaying the 500 is what stops a retry from doing
 * the first half twice. Here the handler's writes commit in the same transaction as the key, so a
 * failure can be undone instead, and must be: storing a 5xx would mean committing whatever the
 * handler wrote before it failed, a half-done effect pinned to the key for the whole window. So
 * 5xx is never stored (nor 1xx, which is not a final answer): it rolls back and a retry runs
 * cleanly. An exception thrown by the handler rolls back too and reaches the container as it was.
 *
 * <p>{@link #DEFAULT} stores 2xx, 3xx and the 4xx that are a business decision on the request as
 * sent (402 for a declined card, 410, 451, and statuses this list does not know). It does not
 * store the 4xx that say "not this request, as sent" or "not now", after which the client fixes the
 * request or waits and should be able to resend with the same key: 400, 401, 403, 404, 405, 406,
 * 407, 408, 409, 411, 412, 413, 414, 415, 416, 417, 421, 422, 423, 424, 425, 426, 428, 429, 431.
 *
 * <p>Immutable and thread-safe; its decision for each status is fixed when it is made.
 */
public final class StorePolicy {
  private static final int FIRST = 200;
  private static final int LAST = 499;
  private static final int[] NOT_STORED_BY_DEFAULT = {
      400, 401, 403, 404, 405, 406, 407, 408, 409, 411, 412, 413, 414, 415, 416, 417, 421, 422, 423, 424, 425, 426,
      428, 429, 431};

  /** 2xx, 3xx and business 4xx stored; see the class comment for the 4xx that are not. */
  public static final StorePolicy DEFAULT = of(status -> Arrays.binarySearch(NOT_STORED_BY_DEFAULT, status) < 0);

  /** Whether each status from 200 to 499 is stored, at index status - 200. */
  private final boolean[] stored;

  private StorePolicy(boolean[] stored) {
    this.stored = stored;
  }

  /**
   * A policy that stores the statuses from 200 to 499 for which {@code stores} is true, asked once
   * for each here. 1xx and 5xx are never stored, whatever it says (see the class comment).
   *
   * @throws IllegalArgumentException if {@code stores} is null
   */
  public static StorePolicy of(IntPredicate stores) {
    if (stores == null) {
      throw new IllegalArgumentException("stores must not be null");
    }
    boolean[] decided = new boolean[LAST - FIRST + 1];
    for (int status = FIRST; status <= LAST; status++) {
      decided[status - FIRST] = stores.test(status);
    }
    return new StorePolicy(decided);
  }

  /**
   * This policy, also storing {@code statuses}.
   *
   * @throws IllegalArgumentException if a status is outside 200 to 499 (a 5xx would commit a
   *     half-done effect, see the class comment)
   */
  public StorePolicy alsoStoring(int... statuses) {
    return with(statuses, true, "alsoStoring");
  }

  /**
   * This policy, not storing {@code statuses}.
   *
   * @throws IllegalArgumentException if a status is outside 200 to 499 (the others are never stored)
   */
  public StorePolicy notStoring(int... statuses) {
    return with(statuses, false, "notStoring");
  }

  /** Whether an answer with {@code status} is stored and replayed; false outside 200 to 499. */
  public boolean stores(int status) {
    return status >= FIRST && status <= LAST && stored[status - FIRST];
  }

  private StorePolicy with(int[] statuses, boolean store, String argument) {
    if (statuses == null) {
      throw new IllegalArgumentException(argument + " must not be null");
    }
    boolean[] changed = stored.clone();
    for (int status : statuses) {
      if (status < FIRST || status > LAST) {
        throw new IllegalArgumentException(argument + ": status " + status + " is outside 200 to 499; 1xx is not a"
            + " final answer and 5xx is never stored: it rolls back, because storing it would commit what the"
            + " handler wrote before it failed");
      }
      changed[status - FIRST] = store;
    }
    return new StorePolicy(changed);
  }

  @Override
  public String toString() {
    StringBuilder notStored = new StringBuilder();
    for (int status = FIRST; status <= LAST; status++) {
      if (!stored[status - FIRST]) {
        notStored.append(notStored.length() == 0 ? "" : ", ").append(status);
      }
    }
    return "StorePolicy[stores 200-499 except " + (notStored.length() == 0 ? "none" : notStored) + "; never 1xx or 5xx]";
  }
}
