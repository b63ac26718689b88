-- Reconciliation's breaks: what a run found wrong between the user's effect table and idem's keys
-- (Reconciliation.record), kept for the operator; idem never deletes them.
CREATE TABLE ${flyway:defaultSchema}.idem_breaks (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- when the run found it, database clock
  found_at    timestamptz NOT NULL,
  -- DUPLICATE_EFFECT, EFFECT_WITHOUT_KEY, KEY_WITHOUT_EFFECT, UNKNOWN_OUTCOME
  kind        text        NOT NULL,
  -- the effect table the run compared ("schema.table.column")
  effect_table text       NOT NULL,
  -- the intent key it is about; null for an effect that carries none
  key         text,
  detail      text        NOT NULL
);
CREATE INDEX idem_breaks_found_at ON ${flyway:defaultSchema}.idem_breaks (found_at);
