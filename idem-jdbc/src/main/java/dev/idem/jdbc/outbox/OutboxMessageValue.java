package dev.idem.jdbc.outbox;

import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/** The one implementation of {@link OutboxMessage}: a value, built by idem only. */
record OutboxMessageValue(
    UUID id, String topic, String aggregateKey, byte[] payload, Map<String, String> headers, Instant createdAt, int attempt) implements OutboxMessage {

  /** Copies {@code payload} and {@code headers} (keeping their order), so the message cannot change under anyone. */
  OutboxMessageValue {
    payload = payload == null ? null : payload.clone();
    headers = headers == null || headers.isEmpty() ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(headers));
  }

  /** A copy of the payload: a publisher may change what it is given without changing the message. */
  @Override
  public byte[] payload() {
    return payload == null ? null : payload.clone();
  }
}
