package dev.idem.jdbc.reconcile;

import java.time.OffsetDateTime;

/**
 * One effect a provider performed, as its records say ({@link ProviderRecords}).
 *
 * @param id the provider's own id of the effect (a charge id); what the operator looks it up by
 * @param callKey the idempotency key the request carried (for idem's external effects, {@code
 *     ExternalAttempt.callKey()}), or null if it carried none
 * @param reference our reference the request carried as metadata (an order or payment id: a value
 *     of the effect table's {@linkplain EffectTable#withReference reference column}), or null
 * @param amount the effect's amount in the provider's smallest unit (cents), 0 for an effect that
 *     has none; reported, never compared
 * @param at when the provider performed it, by its clock
 */
public record ProviderEffect(String id, String callKey, String reference, long amount, OffsetDateTime at) {
  /** @throws IllegalArgumentException if {@code id} is null or empty, or {@code at} is null */
  public ProviderEffect {
    if (id == null || id.isEmpty()) {
      throw new IllegalArgumentException("a provider effect needs its provider's id, was " + (id == null ? "null" : "empty"));
    }
    if (at == null) {
      throw new IllegalArgumentException("provider effect " + id + " needs its time (at)");
    }
  }
}
