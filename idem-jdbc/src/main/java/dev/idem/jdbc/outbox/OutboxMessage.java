package dev.idem.jdbc.outbox;

import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * One message as the relay hands it to a {@link Publisher}.
 *
 * <p>Built by idem; implement it only to hand a fake to your own code in a test.
 */
public interface OutboxMessage {
  /**
   * The id minted when the message was enqueued (a UUIDv7); the same on every attempt and every
   * republish after a crash, so receivers deduplicate on it.
   */
  UUID id();

  /** Where the message goes. */
  String topic();

  /** The key messages are ordered by when the relay keeps order, or null. */
  String aggregateKey();

  /** The bytes enqueued. */
  byte[] payload();

  /** The headers enqueued, in the order they were added; unmodifiable. */
  Map<String, String> headers();

  /** When the enqueuing transaction wrote it (database clock). */
  Instant createdAt();

  /** 1 on the first try, 2 on the first retry, and so on. */
  int attempt();
}
