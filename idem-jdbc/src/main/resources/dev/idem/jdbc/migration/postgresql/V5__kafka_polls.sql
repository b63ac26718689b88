-- KafkaInbox's polls, next to the inbox: one row per partition a consumer group reads, holding the
-- range of offsets of the partition's records delivered last and not yet settled. A poll writes
-- (and commits) its range before any effect runs: one row per partition, not one per record. A
-- poll that delivers records of that range again (the process died in the batch, or a record
-- failed) finds it and makes the partition suspect: its records run one at a time, counted per
-- record in idem_inbox_attempts (V2), so a record that kills the process is the one charged. A
-- range is settled by the next poll starting past it (the batch committed: nothing written), or
-- written as settled (deliveries 0) when records are polled again for no fault of theirs.
-- From this version on, idem_inbox_attempts holds rows only for the records counted one by one (a
-- suspect partition's, a record that failed, a record settled as a dead letter or acknowledged),
-- and its deliveries column counts the polls that counted the record so: suspicion is this
-- table's.
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_polls (
  consumer_group   text    NOT NULL,
  topic            text    NOT NULL,
  record_partition integer NOT NULL,
  -- the unsettled range, first_offset to last_offset included
  first_offset     bigint  NOT NULL,
  last_offset      bigint  NOT NULL,
  -- polls that delivered the range unsettled: 0 settled, 1 delivered once, above one suspect
  deliveries       integer NOT NULL,
  -- the highest offset of the partition's records settled in idem_inbox_attempts (kept as a dead
  -- letter or acknowledged), -1 for none: a poll starting at or below it reads the records'
  -- states, so such a record delivered again is acknowledged, never run again
  given_up_offset  bigint  NOT NULL,
  PRIMARY KEY (consumer_group, topic, record_partition)
);
