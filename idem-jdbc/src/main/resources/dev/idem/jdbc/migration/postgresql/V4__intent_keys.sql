-- The keys a client of a service's own API keeps per intent (idem-http's IntentKeys.database,
-- docs/http.md#client): one row per intent not yet done. The key is minted and this row committed
-- before the first request is sent, so a client that restarts (a crash, a deploy, a replayed job)
-- finds the same key and retries with it instead of minting a fresh one, which the server would
-- take for a new intent. The row is deleted once the intent has a definitive answer.
CREATE TABLE ${flyway:defaultSchema}.idem_intent_keys (
  intent          text        PRIMARY KEY,
  idempotency_key text        NOT NULL,
  -- database clock: when the intent's key was minted (an operator finds keys never released)
  created_at      timestamptz NOT NULL
);
