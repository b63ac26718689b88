/**
 * idem on PostgreSQL: the key table and idempotent executor, the inbox, the transactional outbox
 * and its relay, conditional transitions on your own tables, leases with fencing tokens,
 * per-entity sequences, writes idempotent by nature and bounded notifications. Entry point: {@link dev.idem.jdbc.Idem}.
 */
module dev.idem.jdbc {
  requires transitive dev.idem.core;
  requires transitive java.sql;
  requires transitive org.jooq;
  requires org.postgresql.jdbc;
  requires org.slf4j;
  // ReconcileCommand builds a PGSimpleDataSource, whose class implements javax.naming.Referenceable.
  requires static java.naming;

  exports dev.idem.jdbc;
  exports dev.idem.jdbc.tx;
  exports dev.idem.jdbc.executor;
  exports dev.idem.jdbc.inbox;
  exports dev.idem.jdbc.outbox;
  exports dev.idem.jdbc.transition;
  exports dev.idem.jdbc.lease;
  exports dev.idem.jdbc.sequence;
  exports dev.idem.jdbc.ops;
  exports dev.idem.jdbc.reconcile;
  exports dev.idem.jdbc.nature;
  exports dev.idem.jdbc.notify;
  // InboxAttempts, for KafkaInbox's attempts kept next to the inbox; not an API.
  exports dev.idem.jdbc.internal to dev.idem.kafka;

  // Flyway (idem-flyway's, or the user's own) reads the migrations from this module's resources.
  opens dev.idem.jdbc.migration.postgresql;
  opens dev.idem.jdbc.migration.mariadb;
}
