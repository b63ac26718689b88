-- The idempotent consumer: one row per (consumer, message id), claimed in the consumer's own
-- transaction, before its effect.
CREATE TABLE ${flyway:defaultSchema}.idem_inbox (
  consumer    text        NOT NULL,
  message_id  text        NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX idem_inbox_expires_at ON ${flyway:defaultSchema}.idem_inbox (expires_at);
