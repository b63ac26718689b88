package dev.idem.jdbc.executor;

/**
 * What one {@link OutcomeCompleter#runOnce()} did: how many unknown outcomes it finished, released
 * or left unknown, and how many it skipped because they were no longer stuck when it came to them.
 *
 * <p>Counts are of this run only, as this instance saw them; the rows in the database are the
 * truth (a record whose answer was lost is counted as not finished).
 */
public sealed interface CompleterRun permits CompleterRunValue {
  /**
   * Whether this instance ran: false when another instance held the completer's lease (then every
   * count is 0 and nothing was read or written).
   */
  boolean ran();

  /** Keys the resolver found at the provider: completed with that result, every repeat replays it. */
  int finished();

  /**
   * Keys the provider has no record of: released (lease and window over, the row kept), so the
   * next repeat of the intent calls again, with the same call key and a higher fence.
   */
  int released();

  /**
   * Keys left unknown: the resolver threw, its result could not be encoded, or the run's time ran
   * out before their turn. The next run asks again.
   */
  int stillUnknown();

  /**
   * Keys listed as stuck that were not this run's to finish by the time it took them over: a
   * repeat took over or completed them first, or another completer did. Nothing was changed.
   */
  int skipped();
}
