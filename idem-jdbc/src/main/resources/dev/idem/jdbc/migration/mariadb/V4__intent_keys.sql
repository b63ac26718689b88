-- The keys a client of a service's own API keeps per intent (../postgresql/V4__intent_keys.sql
-- says why). Intents and keys are VARCHAR with V1's binary, non-padding collation, so 'Order-1'
-- and 'order-1 ' are two intents, as on PostgreSQL; an intent is at most 255 characters, as a key
-- is. created_at is DATETIME(6) in UTC from the database clock (UTC_TIMESTAMP(6)).
CREATE TABLE ${flyway:defaultSchema}.idem_intent_keys (
  intent          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,
  idempotency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  created_at      DATETIME(6)  NOT NULL
) ENGINE=InnoDB;
