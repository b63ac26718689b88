-- Lineage across hops (docs/outbox.md#lineage): the key of the intent that produced a message
-- travels with it (the idem-intent header), and the inbox records it, so that two message ids for
-- one intent (a duplicate born upstream: a republish that minted a new id) can be found by reading
-- the tables (IntentLineage). Null where the message carried none (a producer without lineage,
-- rows written before this migration). In the partitioned layout the column is added to every
-- partition of idem_inbox. Adding a nullable column without a default rewrites no row.
ALTER TABLE ${flyway:defaultSchema}.idem_inbox ADD COLUMN intent text;

-- The Debezium layout: the router places this column as the record header idem-intent (null when
-- the message carries none), as idem-kafka's publisher writes it from the message's headers.
ALTER TABLE ${flyway:defaultSchema}.idem_outbox_events ADD COLUMN intent text;
