-- The executor's key table: one row per (scope, key), claimed by an insert under the primary key
-- first, so the check and the claim are one step.
CREATE TABLE ${flyway:defaultSchema}.idem_keys (
  scope            text        NOT NULL,
  key              text        NOT NULL,
  fingerprint      bytea       NOT NULL,
  -- 'I' in flight (external effects between phase 1 and 3), 'C' completed
  state            char(1)     NOT NULL,
  fence            bigint      NOT NULL DEFAULT 1,
  lease_expires_at timestamptz,
  intent           bytea,
  result           bytea,
  created_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (scope, key),
  CONSTRAINT idem_keys_state CHECK (state IN ('I', 'C'))
);
CREATE INDEX idem_keys_expires_at ON ${flyway:defaultSchema}.idem_keys (expires_at);
