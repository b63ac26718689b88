-- idem's tables on MariaDB 10.11+, in the database idem is configured with (Flyway's
-- defaultSchema; by default the DataSource's own database). The same tables as on PostgreSQL
-- (../postgresql/V1__idem.sql says what each is for); what differs, and why:
-- * Keys, scopes, consumers and ids are VARCHAR with a binary collation that does not pad
--   (utf8mb4_nopad_bin): MariaDB's default collations fold case, and every PAD SPACE collation,
--   utf8mb4_bin included, ignores trailing spaces, so 'Order-1' and 'order-1', or 'a' and 'a ',
--   would be one key. PostgreSQL compares them exactly; so does this.
--   Lengths are bounded so the primary keys fit InnoDB's 3072-byte index limit: scope, consumer
--   and stream 255 characters (idem's own limit for a scope), keys and ids 512.
-- * Times are DATETIME(6) holding UTC, written and compared with the database clock
--   (UTC_TIMESTAMP(6)), whatever the session's time zone; never TIMESTAMP, which ends in 2038.
-- * No partial indexes: the outbox's indexes lead with status instead.
-- * No stored routines (creating them needs privileges a service account rarely has when binary
--   logging is on): the fence floor is a one-row table, and the claim is plain statements.
-- * Every table is InnoDB: its row locks and MVCC are what the claim engine relies on.

CREATE TABLE ${flyway:defaultSchema}.idem_keys (
  fence            BIGINT,
  created_at       DATETIME(6)  NOT NULL,
  expires_at       DATETIME(6)  NOT NULL,
  completed_at     DATETIME(6),
  lease_expires_at DATETIME(6),
  scope            VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `key`            VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  fingerprint      VARBINARY(32) NOT NULL,
  -- 'I' in flight, 'C' completed
  state            CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  call_key         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
  result           LONGBLOB,
  PRIMARY KEY (scope, `key`),
  KEY idem_keys_expires_at (expires_at)
) ENGINE=InnoDB;

-- The fence floor: at least every fence of every key row expiry ever deleted. Expiry raises it
-- in a transaction of its own that commits before its delete does, and an external claim reads it
-- with a locking read after its insert, so it sees the latest committed value whatever its
-- snapshot (the role PostgreSQL's non-transactional sequence plays there).
CREATE TABLE ${flyway:defaultSchema}.idem_fence_floor (
  id    TINYINT NOT NULL PRIMARY KEY,
  floor BIGINT  NOT NULL,
  CONSTRAINT idem_fence_floor_one_row CHECK (id = 1)
) ENGINE=InnoDB;
INSERT INTO ${flyway:defaultSchema}.idem_fence_floor (id, floor) VALUES (1, 0);

CREATE TABLE ${flyway:defaultSchema}.idem_inbox (
  consumer    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  message_id  VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  received_at DATETIME(6)  NOT NULL,
  expires_at  DATETIME(6)  NOT NULL,
  PRIMARY KEY (consumer, message_id),
  KEY idem_inbox_expires_at (expires_at)
) ENGINE=InnoDB;

-- The transactional outbox; relays claim unsent rows with FOR UPDATE SKIP LOCKED.
CREATE TABLE ${flyway:defaultSchema}.idem_outbox (
  id              CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  -- the order the database wrote the messages in (AUTO_INCREMENT: InnoDB hands values out at
  -- insert, so two transactions may commit them out of order, as PostgreSQL's identity does)
  seq             BIGINT NOT NULL AUTO_INCREMENT UNIQUE,
  topic           VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  aggregate_key   VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
  payload         LONGBLOB NOT NULL,
  -- the message's headers, as JSON arrays of strings (PostgreSQL: text[])
  header_names    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL DEFAULT '[]' CHECK (JSON_VALID(header_names)),
  header_values   LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL DEFAULT '[]' CHECK (JSON_VALID(header_values)),
  created_at      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  -- 'P' pending, 'S' sent, 'X' parked after too many failed attempts
  status          CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'P',
  attempts        INT NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  last_error      TEXT CHARACTER SET utf8mb4,
  sent_at         DATETIME(6),
  CONSTRAINT idem_outbox_status CHECK (status IN ('P', 'S', 'X')),
  KEY idem_outbox_pending (status, next_attempt_at, seq),
  KEY idem_outbox_sent (status, sent_at),
  KEY idem_outbox_unsent_by_key (aggregate_key, status, seq)
) ENGINE=InnoDB;

CREATE TABLE ${flyway:defaultSchema}.idem_leases (
  resource        VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,
  holder          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
  token           BIGINT NOT NULL,
  expires_at      DATETIME(6) NOT NULL,
  previous_holder TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
  CONSTRAINT idem_leases_token CHECK (token >= 1)
) ENGINE=InnoDB;

CREATE TABLE ${flyway:defaultSchema}.idem_sequences (
  stream       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  entity       VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  last_applied BIGINT NOT NULL,
  PRIMARY KEY (stream, entity),
  CONSTRAINT idem_sequences_last_applied CHECK (last_applied >= 1)
) ENGINE=InnoDB;

-- Caps per recipient: the times of the sends within the cap's window, oldest first, as a JSON
-- array of microseconds since the epoch (PostgreSQL: timestamptz[]).
CREATE TABLE ${flyway:defaultSchema}.idem_notification_caps (
  cap       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  recipient VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  sent_at   LONGTEXT NOT NULL CHECK (JSON_VALID(sent_at)),
  PRIMARY KEY (cap, recipient)
) ENGINE=InnoDB;

CREATE TABLE ${flyway:defaultSchema}.idem_breaks (
  id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  found_at     DATETIME(6) NOT NULL,
  kind         VARCHAR(64) CHARACTER SET ascii NOT NULL,
  effect_table VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `key`        TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
  detail       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  KEY idem_breaks_found_at (found_at)
) ENGINE=InnoDB;
