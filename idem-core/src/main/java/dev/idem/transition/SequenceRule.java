package dev.idem.transition;

/**
 * The per-entity sequence rule: an event carrying sequence number {@code seq} for an entity is
 * applied only if {@code seq > lastApplied}. One number per entity, kept forever, absorbs repeats
 * and reordering without a dedupe window.
 *
 * <p>Guarantees: an event is admitted at most once, and never after a later one was applied, as long
 * as the caller reads {@code lastApplied} and records {@code seq} in one atomic step (a conditional
 * write, {@code WHERE last_seq < :seq}).
 *
 * <p>Does not guarantee: that no event is missing. A gap (5 applied after 3) is accepted; the rule
 * only refuses what is old or already seen.
 */
public final class SequenceRule {
  private SequenceRule() {}

  /**
   * Whether an event with {@code seq} should be applied after {@code lastApplied}.
   *
   * @param lastApplied the highest sequence applied so far, or 0 if none
   * @param seq the event's sequence number, 1 or more
   * @throws IllegalArgumentException if {@code lastApplied} is negative or {@code seq} is below 1:
   *     0 means "none applied", so an event numbered 0 would be skipped as old before anything ran
   */
  public static boolean shouldApply(long lastApplied, long seq) {
    if (lastApplied < 0) {
      throw new IllegalArgumentException("lastApplied must be 0 (none) or more, was " + lastApplied);
    }
    if (seq < 1) {
      throw new IllegalArgumentException("seq must be 1 or more, was " + seq);
    }
    return seq > lastApplied;
  }

  /**
   * The outcome of applying {@code seq} after {@code lastApplied}: {@link Outcome#APPLIED} when the
   * rule admits it (the caller then applies it and records {@code seq}), else {@link
   * Outcome#ALREADY_DONE}, since an event at or below the last applied one was absorbed by it.
   *
   * @throws IllegalArgumentException as {@link #shouldApply}
   */
  public static Outcome outcome(long lastApplied, long seq) {
    return shouldApply(lastApplied, seq) ? Outcome.APPLIED : Outcome.ALREADY_DONE;
  }
}
