package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.ops.StuckKey;
import dev.idem.jdbc.ops.UnknownOutcomes;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;

/** The one implementation of {@link Findings}: a value, built by idem only. */
record FindingsValue(EffectTable target, OffsetDateTime checkedAt, List<Findings.Duplicate> duplicates, long effectsWithoutKey,
    List<String> effectsWithoutKeySample, List<String> keysWithoutEffect, UnknownOutcomes unknownOutcomes,
    List<StuckKey> unknownSample, Optional<ProviderFindings> provider) implements Findings {

  FindingsValue {
    duplicates = List.copyOf(duplicates);
    effectsWithoutKeySample = List.copyOf(effectsWithoutKeySample);
    keysWithoutEffect = List.copyOf(keysWithoutEffect);
    unknownSample = List.copyOf(unknownSample);
    provider = provider == null ? Optional.empty() : provider;
  }

  FindingsValue(EffectTable target, OffsetDateTime checkedAt, List<Findings.Duplicate> duplicates, long effectsWithoutKey,
      List<String> effectsWithoutKeySample, List<String> keysWithoutEffect, UnknownOutcomes unknownOutcomes,
      List<StuckKey> unknownSample) {
    this(target, checkedAt, duplicates, effectsWithoutKey, effectsWithoutKeySample, keysWithoutEffect, unknownOutcomes,
        unknownSample, Optional.empty());
  }

  @Override
  public boolean clean() {
    return duplicates.isEmpty() && effectsWithoutKey == 0 && keysWithoutEffect.isEmpty() && unknownOutcomes.count() == 0
        && provider.map(ProviderFindings::clean).orElse(true);
  }

  /** The one implementation of {@link Findings.Duplicate}. */
  record DuplicateValue(String key, long effects) implements Findings.Duplicate {}
}
