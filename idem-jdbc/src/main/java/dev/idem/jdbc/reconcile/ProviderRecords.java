package dev.idem.jdbc.reconcile;

import java.time.OffsetDateTime;
import java.util.List;

/**
 * What a provider (a card processor, an email service: a system idem's transaction cannot cover)
 * did, as its own records say: the other side of {@link Reconciliation#check(EffectTable,
 * ProviderRecords, java.time.Duration)}. Implement it over the provider's listing API (charges by
 * creation time, with the idempotency key and the metadata each was sent with) or an export of it.
 *
 * <p>Asked once per check, outside any transaction of idem's, with a range read from the
 * database's clock; the provider's clock may differ from it by its skew, which only matters at the
 * range's edges.
 */
@FunctionalInterface
public interface ProviderRecords {
  /**
   * Every effect the provider performed from {@code from} (inclusive) to {@code to} (exclusive):
   * each charge, send or booking once, with the call key it was requested with. Declines and other
   * calls that did nothing are not effects; leave them out.
   *
   * @throws Exception if the provider could not be read; the check fails with it, having recorded nothing
   */
  List<ProviderEffect> effects(OffsetDateTime from, OffsetDateTime to) throws Exception;
}
