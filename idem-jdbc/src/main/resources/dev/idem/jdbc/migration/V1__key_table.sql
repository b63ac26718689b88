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
  created_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (scope, key),
  CONSTRAINT idem_keys_state CHECK (state IN ('I', 'C'))
);
CREATE INDEX idem_keys_expires_at ON ${flyway:defaultSchema}.idem_keys (expires_at);
