package dev.idem.jdbc.outbox;

import dev.idem.internal.Require;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A message to enqueue: topic, payload bytes, an optional aggregate key and headers. Immutable;
 * every {@code with...} returns a copy. Validated when built, so a bad message never reaches the
 * database.
 *
 * <pre>{@code
 * NewMessage m = NewMessage.of("orders.shipped", json).withAggregateKey("order-42").withHeader("type", "OrderShipped");
 * }</pre>
 */
public final class NewMessage {
  private final String topic;
  private final byte[] payload;
  private final String aggregateKey;
  private final Map<String, String> headers;

  private NewMessage(String topic, byte[] payload, String aggregateKey, Map<String, String> headers) {
    this.topic = topic;
    this.payload = payload;
    this.aggregateKey = aggregateKey;
    this.headers = headers;
  }

  /**
   * A message for {@code topic} carrying {@code payload} (copied).
   *
   * @throws IllegalArgumentException if the topic is null or blank, or the payload is null
   */
  public static NewMessage of(String topic, byte[] payload) {
    if (topic == null || topic.isBlank()) {
      throw new IllegalArgumentException("topic must not be " + (topic == null ? "null" : "blank"));
    }
    Require.notNull(payload, "payload");
    return new NewMessage(topic, payload.clone(), null, Map.of());
  }

  /** The same message with {@code key} as its aggregate key (the unit of order for an ordered relay). */
  public NewMessage withAggregateKey(String key) {
    if (key == null || key.isBlank()) {
      throw new IllegalArgumentException("aggregate key must not be " + (key == null ? "null" : "blank"));
    }
    return new NewMessage(topic, payload, key, headers);
  }

  /** The same message with one more header; a header of the same name is replaced. */
  public NewMessage withHeader(String name, String value) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("header name must not be " + (name == null ? "null" : "empty"));
    }
    if (value == null) {
      throw new IllegalArgumentException("value of header '" + name + "' must not be null");
    }
    Map<String, String> copy = new LinkedHashMap<>(headers);
    copy.put(name, value);
    return new NewMessage(topic, payload, aggregateKey, Collections.unmodifiableMap(copy));
  }

  public String topic() {
    return topic;
  }

  /** A copy of the payload. */
  public byte[] payload() {
    return payload.clone();
  }

  byte[] payloadUnsafe() {
    return payload;
  }

  /** The aggregate key, or null. */
  public String aggregateKey() {
    return aggregateKey;
  }

  /** The headers, in the order added; unmodifiable. */
  public Map<String, String> headers() {
    return headers;
  }

  @Override
  public String toString() {
    return "NewMessage[topic=" + topic + ", aggregateKey=" + aggregateKey + ", " + payload.length + " bytes, headers=" + headers + "]";
  }
}
