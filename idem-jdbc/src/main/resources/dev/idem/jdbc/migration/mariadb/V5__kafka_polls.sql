-- KafkaInbox's polls, next to the inbox (../postgresql/V5__kafka_polls.sql says what each column
-- is for). Names are VARCHAR with V1's binary, non-padding collation; the primary key fits
-- InnoDB's 3072-byte limit (group and topic 255 characters, 4 bytes each).
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_polls (
  consumer_group   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  topic            VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  record_partition INT          NOT NULL,
  first_offset     BIGINT       NOT NULL,
  last_offset      BIGINT       NOT NULL,
  deliveries       INT          NOT NULL,
  given_up_offset  BIGINT       NOT NULL,
  PRIMARY KEY (consumer_group, topic, record_partition)
) ENGINE=InnoDB;
