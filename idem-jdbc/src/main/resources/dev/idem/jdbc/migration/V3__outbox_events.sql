-- The outbox as Debezium's Outbox Event Router reads it, for Idem.builder(..).outboxLayout(OutboxLayout.DEBEZIUM):
-- the router's default columns (id, aggregatetype, aggregateid, type, payload), and the message's
-- headers. Idem inserts each message and deletes it again in the enqueuing transaction: the
-- write-ahead log carries the insert to Debezium, the table stays empty (no relay state, no
-- expiry, no bloat), and no row is ever updated, which the router would refuse. Debezium must be
-- reading (its replication slot created) before messages are written: an insert the slot did not
-- see is gone.
CREATE TABLE ${flyway:defaultSchema}.idem_outbox_events (
  -- minted at enqueue (UUIDv7), as in idem_outbox; the router carries it as the record header "id"
  id            uuid  PRIMARY KEY,
  -- the message's topic: the router routes by it
  aggregatetype text  NOT NULL,
  -- the message's aggregate key: the router makes it the record key (order per key); null without one
  aggregateid   text,
  -- the message's "type" header, or '' when it has none
  type          text  NOT NULL,
  payload       bytea NOT NULL,
  -- every header of the message, as a JSON object of strings
  headers       jsonb NOT NULL
);
