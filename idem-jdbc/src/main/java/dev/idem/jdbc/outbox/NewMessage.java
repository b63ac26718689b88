package dev.idem.jdbc.outbox;

import dev.idem.internal.base.Require;
import dev.idem.key.IdempotencyKey;
import java.nio.charset.StandardCharsets;
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
  /**
   * The longest aggregate key, in UTF-8 bytes: it is a column of the b-tree index that ordered
   * relays probe, whose entries PostgreSQL caps at about 2,700 bytes (a longer key made the insert,
   * and with it the caller's transaction, fail).
   */
  public static final int MAX_AGGREGATE_KEY_BYTES = 2000;

  /**
   * The header that carries the key of the intent that produced the message ({@code
   * "scope:value"}, as {@link IdempotencyKey#toString()} writes it): set by {@link #withIntent}, or
   * by the outbox when the message is enqueued inside an executor's effect (its key) or an inbox's
   * effect (the intent the received message carried). idem-kafka's publisher sends it as a record
   * header of this name, the Debezium layout as one too, and an inbox records it, so that two
   * message ids for one intent can be found (docs/outbox.md#lineage).
   */
  public static final String INTENT_HEADER = dev.idem.jdbc.internal.Lineage.HEADER;

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
   * @throws IllegalArgumentException if the topic is null or blank, or the payload is null; also
   *     if the topic (as any text of a message: aggregate key, header names and values) holds a NUL
   *     character, which PostgreSQL refuses in text, or an unpaired surrogate, which the driver
   *     would write as {@code ?}
   */
  public static NewMessage of(String topic, byte[] payload) {
    if (topic == null || topic.isBlank()) {
      throw new IllegalArgumentException("topic must not be " + (topic == null ? "null" : "blank"));
    }
    storable(topic, "topic");
    Require.notNull(payload, "payload");
    return new NewMessage(topic, payload.clone(), null, Map.of());
  }

  /**
   * The same message with {@code key} as its aggregate key (the unit of order for an ordered relay).
   *
   * @throws IllegalArgumentException if the key is null, blank, longer than {@value
   *     #MAX_AGGREGATE_KEY_BYTES} bytes in UTF-8, or not storable text (see {@link #of})
   */
  public NewMessage withAggregateKey(String key) {
    if (key == null || key.isBlank()) {
      throw new IllegalArgumentException("aggregate key must not be " + (key == null ? "null" : "blank"));
    }
    storable(key, "aggregate key");
    int bytes = key.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > MAX_AGGREGATE_KEY_BYTES) {
      throw new IllegalArgumentException("aggregate key is " + bytes + " bytes in UTF-8, longer than " + MAX_AGGREGATE_KEY_BYTES);
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
    storable(name, "header name");
    storable(value, "value of header '" + name + "'");
    Map<String, String> copy = new LinkedHashMap<>(headers);
    copy.put(name, value);
    return new NewMessage(topic, payload, aggregateKey, Collections.unmodifiableMap(copy));
  }

  /**
   * The same message carrying {@code intent} as the key of the intent that produced it (the {@value
   * #INTENT_HEADER} header), instead of the one the outbox would find running on this thread: for
   * a message enqueued outside an executor's effect, or one of several an effect sends to one
   * consumer, each under a key of its own ({@code Keys.child(key, "email")}), so that they are not
   * taken for two ids of one intent.
   *
   * @throws IllegalArgumentException if {@code intent} is null
   */
  public NewMessage withIntent(IdempotencyKey intent) {
    Require.notNull(intent, "intent");
    return withHeader(INTENT_HEADER, intent.toString());
  }

  /**
   * Refuses text PostgreSQL cannot store as given: a NUL (refused, aborting the caller's
   * transaction) or an unpaired surrogate (written as {@code ?} by the driver, silently).
   */
  private static void storable(String s, String what) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\0') {
        throw new IllegalArgumentException(what + " must not contain a NUL character (at index " + i + ")");
      }
      if (Character.isSurrogate(c)) {
        if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          i++;
        } else {
          throw new IllegalArgumentException(what + " has an unpaired surrogate at index " + i);
        }
      }
    }
  }

  /** Where the message goes. */
  String topic() {
    return topic;
  }

  /** A copy of the payload. */
  byte[] payload() {
    return payload.clone();
  }

  byte[] payloadUnsafe() {
    return payload;
  }

  /** The aggregate key, or null. */
  String aggregateKey() {
    return aggregateKey;
  }

  /** The headers, in the order added; unmodifiable. */
  Map<String, String> headers() {
    return headers;
  }

  @Override
  public String toString() {
    return "NewMessage[topic=" + topic + ", aggregateKey=" + aggregateKey + ", " + payload.length + " bytes, headers=" + headers + "]";
  }
}
