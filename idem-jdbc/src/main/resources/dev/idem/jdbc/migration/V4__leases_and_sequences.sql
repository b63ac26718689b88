-- Leases on named resources. The row outlives its holders so the fencing token only grows.
CREATE TABLE ${flyway:defaultSchema}.idem_leases (
  resource   text        PRIMARY KEY,
  holder     text,
  token      bigint      NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Per-entity sequences: the highest sequence number applied, one row per (stream, entity), kept
-- forever.
CREATE TABLE ${flyway:defaultSchema}.idem_sequences (
  stream       text   NOT NULL,
  entity       text   NOT NULL,
  last_applied bigint NOT NULL,
  PRIMARY KEY (stream, entity)
);
