-- KafkaInbox's attempts at records, next to the inbox, so they survive a restart and a rebalance:
-- one row per record of a consumer group delivered and not settled yet, or given up on. A record
-- run alone has its attempt counted (committed) before its effect runs, so a record whose effect
-- kills the process counts too, and after the consumer's maxAttempts it goes to the dead letters
-- instead of running again, whichever consumer of the group holds its partition by then.
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_attempts (
  consumer_group   text        NOT NULL,
  topic            text        NOT NULL,
  record_partition integer     NOT NULL,
  record_offset    bigint      NOT NULL,
  -- the record's message id when counted: a record at the same place with another id (a topic
  -- deleted and made again) starts from zero
  message_id       text        NOT NULL,
  -- polls that delivered it while unsettled: above one, an earlier delivery had no outcome (its
  -- consumer died, or the record failed or was in flight), and the consumer runs the partition's
  -- records one at a time until they settle, so a death is blamed on the one record running
  deliveries       integer     NOT NULL,
  -- runs of its effect that are its own: alone (counted before the effect), or failed with its own
  -- error; past the consumer's maxAttempts it goes to the dead letters
  attempts         integer     NOT NULL,
  -- 'A' attempted, not settled (deleted once the group's consumer is past it); 'D' kept as a dead
  -- letter; 'E' its effect had committed already (its id in the inbox), so it was acknowledged as a
  -- duplicate instead of dead-lettered. 'D' and 'E' rows are kept for the operator; idem never
  -- deletes them.
  state            char(1)     NOT NULL,
  -- database clock
  last_attempt_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer_group, topic, record_partition, record_offset),
  CONSTRAINT idem_inbox_attempts_state CHECK (state IN ('A', 'D', 'E'))
);
