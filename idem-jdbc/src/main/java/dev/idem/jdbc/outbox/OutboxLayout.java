package dev.idem.jdbc.outbox;

/**
 * Where {@link Outbox#enqueue} writes messages, chosen once per {@code Idem} with {@code
 * Idem.builder(..).outboxLayout(..)}: which relay carries them is configuration, and the code that
 * enqueues is the same for both.
 */
public enum OutboxLayout {
  /**
   * The default: {@code idem_outbox}, one row per message with its delivery state (pending, sent,
   * parked), which idem's polling {@link Relay} (or any relay over it, such as idem-kafka's
   * publisher) claims, publishes and marks.
   */
  POLLED,

  /**
   * For Debezium's Outbox Event Router: {@code idem_outbox_events}, the table shape the router
   * reads ({@code id}, {@code aggregatetype}, {@code aggregateid}, {@code type}, {@code payload},
   * plus {@code headers}). Each message is inserted and deleted again in the enqueuing transaction:
   * the write-ahead log carries the insert to Debezium's change data capture, the table stays
   * empty, nothing ever updates a row (an update is an error to the router) and nothing has to
   * expire. Idem's relay does not read this table; idem-debezium gives the connector's settings.
   */
  DEBEZIUM
}
