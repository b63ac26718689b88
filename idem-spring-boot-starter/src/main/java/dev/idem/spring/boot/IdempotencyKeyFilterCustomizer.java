package dev.idem.spring.boot;

import dev.idem.http.IdempotencyKeyFilter;

/**
 * Changes the {@link IdempotencyKeyFilter} the starter builds, after the {@code idem.http.*}
 * properties are applied: the scope of keys (e.g. the tenant), which requests are guarded, the
 * store policy. Declare one or more as beans; they run in their {@code @Order}.
 */
@FunctionalInterface
public interface IdempotencyKeyFilterCustomizer {

  /** Adjusts {@code builder}. */
  void customize(IdempotencyKeyFilter.Builder builder);
}
