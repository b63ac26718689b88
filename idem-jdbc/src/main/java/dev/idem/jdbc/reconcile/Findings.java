package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.ops.StuckKey;
import dev.idem.jdbc.ops.UnknownOutcomes;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;

/**
 * What one {@link Reconciliation#check} found, all read in one snapshot. Lists hold at most the
 * table's {@code sample} examples; the counts are exact.
 */
public sealed interface Findings permits FindingsValue {
  /** The effect table checked. */
  EffectTable target();

  /** The database clock when the snapshot was taken. */
  OffsetDateTime checkedAt();

  /** Intents with more than one effect (key, count), most effects first. */
  List<Duplicate> duplicates();

  /** Effects whose key column is null. */
  long effectsWithoutKey();

  /**
   * Their row addresses: on PostgreSQL {@code ctid}s (valid until the row is updated or the table
   * vacuumed fully); on MariaDB, which has none, their primary keys ({@code column=value}, joined
   * by ", " for a key of several columns).
   */
  List<String> effectsWithoutKeySample();

  /** Completed idem keys of the scope with no effect; empty when no scope was given. */
  List<String> keysWithoutEffect();

  /** External effects whose outcome is unknown, in every scope (the operator's count). */
  UnknownOutcomes unknownOutcomes();

  /** The oldest of them. */
  List<StuckKey> unknownSample();

  /**
   * What the provider check found, if the check was given the provider's records ({@link
   * Reconciliation#check(EffectTable, ProviderRecords, java.time.Duration)}); empty otherwise.
   */
  Optional<ProviderFindings> provider();

  /**
   * True if nothing is wrong: no duplicate, no effect without key, no key without effect, no
   * unknown outcome, and no provider break.
   */
  boolean clean();

  /** An intent with more than one effect. */
  sealed interface Duplicate permits FindingsValue.DuplicateValue {
    /** The intent's key. */
    String key();

    /** How many effects it has. */
    long effects();
  }
}
