-- Lineage across hops (../postgresql/V3__intent_lineage.sql says why): the inbox records the key
-- of the intent a message carried (its idem-intent header), null when it carried none. At most
-- 511 characters (an intent key's scope, ':' and value), compared exactly as idem's keys are.
-- MariaDB has no Debezium layout, so no events table to extend.
ALTER TABLE ${flyway:defaultSchema}.idem_inbox
  ADD COLUMN intent VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL;
