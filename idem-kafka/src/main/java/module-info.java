/**
 * idem over Kafka: {@link dev.idem.kafka.KafkaPublisher} relays the outbox to Kafka topics, and
 * {@link dev.idem.kafka.KafkaInbox} consumes them through the batch inbox, one effect per message
 * id.
 */
module dev.idem.kafka {
  requires transitive dev.idem.core;
  requires transitive dev.idem.jdbc;
  requires transitive kafka.clients;
  requires org.slf4j;

  exports dev.idem.kafka;
}
