-- The card provider's webhook events, one row per event; no unique event_id on purpose: a second
-- row would be a double effect, which the @Idempotent service method is there to prevent.
CREATE TABLE provider_events (id bigserial PRIMARY KEY, event_id text NOT NULL, order_id text NOT NULL, type text NOT NULL);
ALTER TABLE payments ADD COLUMN refunded boolean NOT NULL DEFAULT false;
