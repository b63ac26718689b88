package dev.idem.jdbc.ops;

import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import java.time.OffsetDateTime;

/**
 * An external effect whose outcome is unknown: its key is in flight and its lease ran out, so the
 * call may or may not have reached the provider. Look it up there by {@code callKey}, then {@link
 * Operations#resolve} (it did) or {@link Operations#release} (it did not), passing {@code fence}.
 */
public sealed interface StuckKey permits StuckKeyValue {
  /** The intent's key (scope and value). */
  IdempotencyKey key();

  /** The fencing token of the last attempt: what resolve and release must be given. */
  long fence();

  /** The key the call sent to the provider (the same for every attempt). */
  String callKey();

  /** How long ago the lease ran out, by the database clock. */
  Duration leaseEndedAgo();

  /** When the key was claimed, by the database clock. */
  OffsetDateTime createdAt();
}
