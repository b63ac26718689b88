-- The service's own tables, as ../postgresql/V1__payments.sql makes them on PostgreSQL; no unique
-- constraint on purpose: a second row would be a double effect. Text compared exactly, as
-- PostgreSQL compares it (utf8mb4_nopad_bin: MariaDB's default collations fold case, and
-- utf8mb4_bin pads trailing spaces); the message id is MariaDB's UUID type (10.7+), as it is
-- PostgreSQL's uuid.
CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL, amount INT NOT NULL,
  charge_id VARCHAR(255) NOT NULL) ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
CREATE TABLE receipts (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL, message_id UUID NOT NULL)
  ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
-- The card provider's webhook events, one row per event; no unique event_id on purpose: a second
-- row would be a double effect, which the @Idempotent service method is there to prevent.
CREATE TABLE provider_events (id BIGINT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(255) NOT NULL,
  order_id VARCHAR(255) NOT NULL, type VARCHAR(64) NOT NULL) ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
