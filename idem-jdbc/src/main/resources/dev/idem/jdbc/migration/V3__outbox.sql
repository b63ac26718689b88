-- The transactional outbox: messages written in the caller's transaction, with ids minted there;
-- relays claim unsent rows with FOR UPDATE SKIP LOCKED (never "id > last seen": ids commit out of order).
CREATE TABLE ${flyway:defaultSchema}.idem_outbox (
  id              uuid        PRIMARY KEY,
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
CREATE INDEX idem_outbox_pending ON ${flyway:defaultSchema}.idem_outbox (next_attempt_at, id) WHERE status = 'P';
CREATE INDEX idem_outbox_sent ON ${flyway:defaultSchema}.idem_outbox (sent_at) WHERE status = 'S';
-- An ordered relay asks, for each candidate, whether an older unsent message of its aggregate key
-- exists; this index answers that without scanning the key's sent history.
CREATE INDEX idem_outbox_unsent_by_key ON ${flyway:defaultSchema}.idem_outbox (aggregate_key, id) WHERE status <> 'S' AND aggregate_key IS NOT NULL;
