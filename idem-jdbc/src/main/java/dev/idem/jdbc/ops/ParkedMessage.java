package dev.idem.jdbc.ops;

import java.time.OffsetDateTime;
import java.util.UUID;

/**
 * An outbox message the relay gave up on after its max attempts; it stays until re-driven.
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
}
