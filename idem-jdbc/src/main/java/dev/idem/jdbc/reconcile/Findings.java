package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.ops.StuckKey;
import dev.idem.jdbc.ops.UnknownOutcomes;
import java.time.OffsetDateTime;
import java.util.List;

/**
 * What one {@link Reconciliation#check} found, all read in one snapshot. Lists hold at most the
 * table's {@code sample} examples; the counts are exact.
 *
 * @param checkedAt the database clock when the snapshot was taken
 * @param duplicates intents with more than one effect (key, count), most effects first
 * @param effectsWithoutKey effects whose key column is null
 * @param effectsWithoutKeySample their row addresses ({@code ctid}s: valid until the row is updated or the table vacuumed fully)
 * @param keysWithoutEffect completed idem keys of the scope with no effect; empty when no scope was given
 * @param unknownOutcomes external effects whose outcome is unknown, in every scope (the operator's count)
 * @param unknownSample the oldest of them
 */
public record Findings(EffectTable target, OffsetDateTime checkedAt, List<Duplicate> duplicates, long effectsWithoutKey,
    List<String> effectsWithoutKeySample, List<String> keysWithoutEffect, UnknownOutcomes unknownOutcomes,
    List<StuckKey> unknownSample) {

  /** An intent with more than one effect. */
  public record Duplicate(String key, long effects) {}

  public Findings {
    duplicates = List.copyOf(duplicates);
    effectsWithoutKeySample = List.copyOf(effectsWithoutKeySample);
    keysWithoutEffect = List.copyOf(keysWithoutEffect);
    unknownSample = List.copyOf(unknownSample);
  }

  /** True if nothing is wrong: no duplicate, no effect without key, no key without effect, no unknown outcome. */
  public boolean clean() {
    return duplicates.isEmpty() && effectsWithoutKey == 0 && keysWithoutEffect.isEmpty() && unknownOutcomes.count() == 0;
  }
}
