package dev.idem.spring.boot;

import dev.idem.http.IdempotencyKeyFilter;

/**
 * Changes every {@link IdempotencyKeyFilter} the starter builds, after the {@code idem.http.*}
 * properties are applied: e.g. the fingerprint, the store policy or a guard by code of the {@code
 * url-patterns} routes. Declare one or more as beans; they run in their {@code @Order}. On an
 * {@code @Idempotent} handler's route what the annotation sets is applied after the customizers
 * and replaces theirs: the key required, the window when given, and the store policy when {@code
 * storedStatuses} is given ({@code StorePolicy.DEFAULT} plus those); every request of the route is
 * guarded.
 *
 * <p>Scope keys with {@code idem.http.scope-header} or a {@code ScopeResolver} bean, not here: the
 * starter checks at start-up that keys have a caller scope, and cannot see one a customizer sets.
 */
@FunctionalInterface
public interface IdempotencyKeyFilterCustomizer {

  /** Adjusts {@code builder}. */
  void customize(IdempotencyKeyFilter.Builder builder);
}
