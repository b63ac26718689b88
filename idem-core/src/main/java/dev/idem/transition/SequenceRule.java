package dev.idem.transition;

/**
 * The per-entity sequence rule: an event carrying sequence number {@code seq} for an entity is
 * applied only if {@code seq > lastApplied}. One number per entity, kept forever, absorbs repeats
 * and reordering without a dedupe window.
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
   */
  public static boolean shouldApply(long lastApplied, long seq) {
    return seq > lastApplied;
  }
}
