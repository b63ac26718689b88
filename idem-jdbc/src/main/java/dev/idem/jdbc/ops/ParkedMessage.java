package dev.idem.jdbc.ops;

import java.time.OffsetDateTime;
import java.util.UUID;

/**
 * An outbox message the relay gave up on after its max attempts; it stays until re-driven. A
 * publish that failed may still have reached the broker (a lost acknowledgement): {@link
 * #effectCommitted} tells the operator when a consumer already applied it.
 */
public sealed interface ParkedMessage permits ParkedMessageValue {
  UUID id();

  String topic();

  /** Null if the message has none. */
  String aggregateKey();

  int attempts();

  /** The last publish failure the relay recorded, or null. */
  String lastError();

  /** When the relay parked it, by the database clock. */
  OffsetDateTime parkedSince();

  /**
   * True if an inbox of this database (any consumer) holds the message's id: an inbox row commits
   * with its consumer's effect, so that effect already committed, and the message is not lost. A
   * redrive sends a repeat the inbox acknowledges without effect. False means not known, never
   * "not applied": a consumer in another database, one without an inbox, or an inbox row deleted
   * past its window is not seen.
   */
  boolean effectCommitted();
}
