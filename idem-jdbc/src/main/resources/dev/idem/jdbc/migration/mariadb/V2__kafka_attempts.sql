-- KafkaInbox's attempts at records, next to the inbox (../postgresql/V2__kafka_attempts.sql says
-- what each column is for). Names and ids are VARCHAR with the binary, non-padding collation of
-- V1's; the primary key fits InnoDB's 3072-byte limit (group and topic 255 characters, 4 bytes each).
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_attempts (
  consumer_group   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  topic            VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  record_partition INT          NOT NULL,
  record_offset    BIGINT       NOT NULL,
  message_id       VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  deliveries       INT          NOT NULL,
  attempts         INT          NOT NULL,
  state            CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  last_attempt_at  DATETIME(6)  NOT NULL,
  PRIMARY KEY (consumer_group, topic, record_partition, record_offset),
  CONSTRAINT idem_inbox_attempts_state CHECK (state IN ('A', 'D', 'E'))
) ENGINE=InnoDB;
