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
