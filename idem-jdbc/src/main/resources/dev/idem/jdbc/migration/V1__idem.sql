-- idem's tables, in the schema idem is configured with (Flyway's defaultSchema).

-- The executor's key table: one row per (scope, key), claimed by an insert under the primary key
-- first, so the check and the claim are one step.
CREATE TABLE ${flyway:defaultSchema}.idem_keys (
  scope            text        NOT NULL,
  key              text        NOT NULL,
  -- SHA-256 of the canonical request (32 bytes): a repeat with another one is refused
  fingerprint      bytea       NOT NULL,
  -- 'I' in flight (external effects between phase 1 and 3), 'C' completed. A local effect's row
  -- is written as 'C' inside the effect's own transaction, so no other transaction ever sees it
  -- in flight.
  state            char(1)     NOT NULL,
  -- fencing token of the current claim; grows by one on every takeover and re-claim
  fence            bigint      NOT NULL DEFAULT 1,
  -- external effects: when the holder's claim ends (database clock); NULL for local effects
  lease_expires_at timestamptz,
  -- external effects: the persisted intent, the key the call sends to the provider
  call_key         text,
  result           bytea,
  created_at       timestamptz NOT NULL,
  completed_at     timestamptz,
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (scope, key)
  -- No CHECK on state: PostgreSQL rebuilds a table's CHECK expressions for every statement that
  -- writes a row, and on the claim's one-row insert that cost more than the check is worth
  -- (pgbench: the claim transaction 11-19% faster without it). Only idem writes the column, with
  -- constants, and it reads anything but 'C' as not completed.
);
CREATE INDEX idem_keys_expires_at ON ${flyway:defaultSchema}.idem_keys (expires_at);

-- The idempotent consumer: one row per (consumer, message id), claimed in the consumer's own
-- transaction, before its effect.
CREATE TABLE ${flyway:defaultSchema}.idem_inbox (
  consumer    text        NOT NULL,
  message_id  text        NOT NULL,
  received_at timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX idem_inbox_expires_at ON ${flyway:defaultSchema}.idem_inbox (expires_at);

-- The transactional outbox: messages written in the caller's transaction, with ids minted there;
-- relays claim unsent rows with FOR UPDATE SKIP LOCKED (never "id > last seen": ids commit out of order).
CREATE TABLE ${flyway:defaultSchema}.idem_outbox (
  id              uuid        PRIMARY KEY,
  -- the order the database wrote the messages in: what an ordered relay publishes each aggregate
  -- key's messages by (never the ids, minted from the clocks of the JVMs that enqueued them)
  seq             bigint      GENERATED ALWAYS AS IDENTITY,
  topic           text        NOT NULL,
  aggregate_key   text,
  payload         bytea       NOT NULL,
  header_names    text[]      NOT NULL DEFAULT '{}',
  header_values   text[]      NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- 'P' pending, 'S' sent, 'X' parked after too many failed attempts
  status          char(1)     NOT NULL DEFAULT 'P',
  attempts        integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  sent_at         timestamptz,
  CONSTRAINT idem_outbox_status CHECK (status IN ('P', 'S', 'X'))
);
CREATE INDEX idem_outbox_pending ON ${flyway:defaultSchema}.idem_outbox (next_attempt_at, seq) WHERE status = 'P';
CREATE INDEX idem_outbox_sent ON ${flyway:defaultSchema}.idem_outbox (sent_at) WHERE status = 'S';
-- An ordered relay asks, for each candidate, whether an older unsent message of its aggregate key
-- exists; this index answers that without scanning the key's sent history.
CREATE INDEX idem_outbox_unsent_by_key ON ${flyway:defaultSchema}.idem_outbox (aggregate_key, seq) WHERE status <> 'S' AND aggregate_key IS NOT NULL;

-- Leases on named resources. The row outlives its holders (release clears the holder, never the
-- row) so the fencing token only grows: every grant sets token = token + 1.
CREATE TABLE ${flyway:defaultSchema}.idem_leases (
  resource        text        PRIMARY KEY,
  -- null when released
  holder          text,
  token           bigint      NOT NULL,
  -- decided by the database clock (clock_timestamp()), never a JVM's
  expires_at      timestamptz NOT NULL,
  -- the holder the latest grant took over from after its lease ended; null if the lease was free
  previous_holder text,
  CONSTRAINT idem_leases_token CHECK (token >= 1)
);

-- Per-entity sequences: the highest sequence number applied, one row per (stream, entity), kept
-- forever.
CREATE TABLE ${flyway:defaultSchema}.idem_sequences (
  stream       text   NOT NULL,
  entity       text   NOT NULL,
  last_applied bigint NOT NULL,
  PRIMARY KEY (stream, entity),
  CONSTRAINT idem_sequences_last_applied CHECK (last_applied >= 1)
);

-- The claim's signal: a claim given with its effect in one round trip raises this when the key
-- already has a row, so that PostgreSQL skips the effect and rolls back the round trip's implicit
-- transaction, having written nothing (no dead tuple, no transaction id). The detail says what the
-- claim saw: 'R <completed> <now>' (epoch seconds) for a completed row of the same request within
-- its window, empty for anything else, which idem then reads in a statement of its own.
CREATE FUNCTION ${flyway:defaultSchema}.idem_repeat(detail text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'IDEM1', MESSAGE = 'idem: the key already has a row', DETAIL = coalesce(detail, '');
END
$$;
