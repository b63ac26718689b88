/**
 * Debezium as the relay of idem's outbox: {@link dev.idem.debezium.DebeziumOutbox} gives the
 * PostgreSQL connector's and the Outbox Event Router's settings for the events table. Debezium
 * itself is not a dependency: it runs where you run it (Kafka Connect, Debezium Server, the
 * embedded engine).
 */
module dev.idem.debezium {
  requires transitive dev.idem.jdbc;

  exports dev.idem.debezium;
}
