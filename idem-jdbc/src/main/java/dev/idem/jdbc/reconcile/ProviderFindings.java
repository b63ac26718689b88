package dev.idem.jdbc.reconcile;

import dev.idem.key.IdempotencyKey;
import java.time.OffsetDateTime;
import java.util.List;

/**
 * What a provider check found ({@link Findings#provider}): the provider's effects in the range
 * compared with idem's external keys and the service's effect table. Each provider effect is given
 * the intent it belongs to: the idem key whose call key it carried, else the effect table's key of
 * the row whose reference column holds its reference. Lists hold at most the effect table's
 * {@code sample} examples; the counts are exact.
 *
 * @param from the range's start, by the database clock
 * @param to the range's end, by the database clock (when the check began)
 * @param effects how many effects the provider listed
 * @param duplicateCount how many intents have more than one provider effect
 * @param duplicates those intents, most effects first
 * @param effectsWithoutKeyCount how many provider effects belong to no intent
 * @param effectsWithoutKey those effects
 * @param keysUnseenCount how many completed external keys have no provider effect
 * @param keysUnseen those keys
 */
public record ProviderFindings(OffsetDateTime from, OffsetDateTime to, int effects, long duplicateCount,
    List<DoubleEffect> duplicates, long effectsWithoutKeyCount, List<ProviderEffect> effectsWithoutKey,
    long keysUnseenCount, List<UnseenKey> keysUnseen) {

  public ProviderFindings {
    duplicates = List.copyOf(duplicates);
    effectsWithoutKey = List.copyOf(effectsWithoutKey);
    keysUnseen = List.copyOf(keysUnseen);
  }

  /** True if every provider effect belongs to one intent alone and every completed call has its effect. */
  public boolean clean() {
    return duplicateCount == 0 && effectsWithoutKeyCount == 0 && keysUnseenCount == 0;
  }

  /**
   * An intent the provider performed more than once (the double charge): every guard missed it.
   *
   * @param intent the intent's key (an idem key's value, or the effect table's key)
   * @param effects its provider effects, oldest first
   */
  public record DoubleEffect(String intent, List<ProviderEffect> effects) {
    public DoubleEffect {
      effects = List.copyOf(effects);
    }

    /** The sum of their amounts: what was taken, once of which was meant. */
    public long amount() {
      return effects.stream().mapToLong(ProviderEffect::amount).sum();
    }
  }

  /**
   * An external effect idem recorded as completed whose call key the provider has no effect for
   * in the range: the result recorded does not match what the provider did (or the call ended in
   * no effect, a decline, which the provider does not list).
   *
   * @param key the intent's key
   * @param callKey the key its calls carried
   * @param completedAt when its result was recorded, by the database clock
   */
  public record UnseenKey(IdempotencyKey key, String callKey, OffsetDateTime completedAt) {}
}
