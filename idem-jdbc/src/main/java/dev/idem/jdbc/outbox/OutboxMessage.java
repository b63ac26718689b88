package dev.idem.jdbc.outbox;

import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * One message as the relay hands it to a {@link Publisher}.
 *
 * @param id the id minted when the message was enqueued (a UUIDv7); the same on every attempt and
 *     every republish after a crash, so receivers deduplicate on it
 * @param topic where the message goes
 * @param aggregateKey the key messages are ordered by when the relay keeps order, or null
 * @param payload the bytes enqueued
 * @param headers the headers enqueued, in the order they were added; unmodifiable
 * @param createdAt when the enqueuing transaction wrote it (database clock)
 * @param attempt 1 on the first try, 2 on the first retry, and so on
 */
public record OutboxMessage(
    UUID id, String topic, String aggregateKey, byte[] payload, Map<String, String> headers, Instant createdAt, int attempt) {

  /** Copies {@code payload} and {@code headers} (keeping their order), so the message cannot change under anyone. */
  public OutboxMessage {
    payload = payload == null ? null : payload.clone();
    headers = headers == null || headers.isEmpty() ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(headers));
  }

  /** A copy of the payload: a publisher may change what it is given without changing the message. */
  @Override
  public byte[] payload() {
    return payload == null ? null : payload.clone();
  }
}
