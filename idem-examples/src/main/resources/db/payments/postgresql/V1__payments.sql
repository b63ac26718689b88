-- The service's own tables; no unique constraint on purpose: a second row would be a double effect.
CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL, charge_id text NOT NULL);
CREATE TABLE receipts (id bigserial PRIMARY KEY, order_id text NOT NULL, message_id uuid NOT NULL);
