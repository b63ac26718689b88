package dev.idem.testing;

/**
 * The ways {@link Repeats} delivers one intent to your code: the repeats every hop of a
 * distributed system makes, from the seed's list of how idempotency fails. Each runs with a fresh
 * intent (a business key no row has yet), so one trial never sees another's effects.
 *
 * <p>Five are within idem's guarantee, one effect per intent whatever is repeated ({@link
 * #withinGuarantee()}); {@link #PAST_WINDOW} and {@link #FRESH_KEY} are the two repeats no key
 * table can absorb. The report shows what they did, labelled as outside the guarantee, and asserts
 * them only when asked ({@link Repeats#expectOneEffect}).
 */
public enum Delivery {
  /**
   * The same copy, same key, N times at once on real threads started together (a double tap, a
   * balancer retrying in parallel, a redelivery while the first still runs); N is {@link
   * Repeats#concurrentCopies}, 8 by default. The effects are counted after the whole burst.
   */
  CONCURRENT(true, null),
  /**
   * Copy 1 is delivered and its reply discarded, whatever it was (a timeout that cannot tell "it
   * failed" from "it worked"); copy 2, the same key, follows.
   */
  REPLY_LOST(true, null),
  /**
   * The handler's transaction is killed as it commits: its backend terminated with {@code
   * pg_terminate_backend} (on MariaDB its connection killed with {@code KILL CONNECTION}) before
   * the commit reaches the server, so nothing commits and the
   * application sees its connection die. The client or broker then delivers again with the same
   * key (the target's own retry). Needs the service on a {@link FaultyDataSource} ({@link
   * Repeats#faults}); one trial per writing commit a clean delivery makes, so the effect's commit
   * is killed even when it is not idem's.
   */
  KILLED_BEFORE_COMMIT(true, null),
  /**
   * As {@link #KILLED_BEFORE_COMMIT}, but the backend is terminated right after the commit
   * succeeded: the application sees its connection die with the outcome unknown, and the repeat
   * must find the work done.
   */
  KILLED_AFTER_COMMIT(true, null),
  /**
   * Copy 2, same key, after idem's dedupe window for the key is over: idem's rows for the key are
   * aged with SQL (no real time passes). Outside the guarantee: past the window, a repeat is a new
   * intent to idem.
   */
  PAST_WINDOW(false, "past the window a repeat is new: size the window to the slowest path"),
  /**
   * Copy 2 of the same intent with a fresh key: the client lost copy 1's reply and minted a new
   * key for its retry. Outside the guarantee: to the server it is a new intent.
   */
  FRESH_KEY(false, "a retry with a fresh key is a new intent to the server: mint the key once per intent"),
  /**
   * For handlers that apply per-entity sequences: messages numbered 1..n of one intent (each with
   * a key of its own), each delivered twice, shuffled, and message 1 once more at the end, late.
   * Asserted: no message's effect twice, and the intent ends at message n (its highest sequence in
   * the table is n: a late older message did not move it back). Needs {@link
   * Effects#sequencedBy}; n is {@link Repeats#messages}, 3 by default.
   */
  OUT_OF_ORDER(true, null);

  private final boolean withinGuarantee;
  private final String advice;

  Delivery(boolean withinGuarantee, String advice) {
    this.withinGuarantee = withinGuarantee;
    this.advice = advice;
  }

  /**
   * Whether idem guarantees one effect per intent under this delivery: false for {@link
   * #PAST_WINDOW} and {@link #FRESH_KEY}.
   */
  public boolean withinGuarantee() {
    return withinGuarantee;
  }

  /** For a delivery outside the guarantee, what to do about it; null otherwise. */
  String advice() {
    return advice;
  }

  boolean kills() {
    return this == KILLED_BEFORE_COMMIT || this == KILLED_AFTER_COMMIT;
  }
}
