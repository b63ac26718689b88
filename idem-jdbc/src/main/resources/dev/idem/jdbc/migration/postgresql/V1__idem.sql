-- idem's tables, in the schema idem is configured with (Flyway's defaultSchema).

-- The executor's key table: one row per (scope, key), claimed by an insert under the primary key
-- first, so the check and the claim are one step. The row is kept small
-- (docs/scale.md#sizing-rate--window): its 8-byte columns come first (no alignment padding
-- between them or after a text column).
CREATE TABLE ${flyway:defaultSchema}.idem_keys (
  -- fencing token of the current claim; a new external row starts above the fence floor
  -- (idem_fence_floor). A local effect's row has no fencing token (null): nothing is ever fenced
  -- by it, since its effect committed with its claim. An external claim writes its token
  -- explicitly (above the fence floor), and one that re-claims a local row starts above the floor
  -- too (greatest ignores the null).
  fence            bigint,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  -- external effects only: when the result was recorded. A local effect's row has none: its
  -- effect commits with the claim, so it completed when it was created (readers take
  -- coalesce(completed_at, created_at)).
  completed_at     timestamptz,
  -- external effects: when the holder's claim ends (database clock); NULL once completed
  lease_expires_at timestamptz,
  scope            text        NOT NULL,
  key              text        NOT NULL,
  -- the first half of the SHA-256 of the canonical request (16 bytes: 128 bits still tell two
  -- requests apart): a repeat with another one is refused
  fingerprint      bytea       NOT NULL,
  -- 'I' in flight (external effects between phase 1 and 3), 'C' completed. A local effect's row
  -- is written as 'C' inside the effect's own transaction, so no other transaction ever sees it
  -- in flight. PostgreSQL's one-byte "char" rather than char(1), which carries a length byte: the
  -- row of a local effect with a small result then ends at 120 bytes instead of 121, which
  -- alignment would round up to 128.
  state            "char"      NOT NULL,
  -- external effects: the persisted intent, the key the call sends to the provider
  call_key         text,
  result           bytea,
  PRIMARY KEY (scope, key)
  -- No CHECK on state: PostgreSQL rebuilds a table's CHECK expressions for every statement that
  -- writes a row, and on the claim's one-row insert that cost more than the check is worth
  -- (pgbench: the claim transaction 11-19% faster without it). Only idem writes the column, with
  -- constants, and it reads anything but 'C' as not completed.
);
CREATE INDEX idem_keys_expires_at ON ${flyway:defaultSchema}.idem_keys (expires_at);

-- The fence floor, which lets expiry delete external effects' keys: at least every fence of every
-- key row expiry ever deleted. A sequence, read through last_value, because a sequence is not
-- transactional: a claim that started before expiry raised the floor still sees the raised value
-- once it has inserted (idem_fence_above_floor). Expiry raises it before its delete commits
-- (idem_raise_fence_floor), so a key re-created after its row was deleted gets a fence above any a
-- stale holder of the deleted row could present.
CREATE SEQUENCE ${flyway:defaultSchema}.idem_fence_floor MINVALUE 0 START WITH 0;

CREATE FUNCTION ${flyway:defaultSchema}.idem_raise_fence_floor(highest bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  -- One raiser at a time until its transaction ends: setval is not transactional, and two raisers
  -- reading last_value at once could otherwise lower it.
  PERFORM pg_advisory_xact_lock(hashtext('${flyway:defaultSchema}.idem_fence_floor'));
  IF highest > (SELECT last_value FROM ${flyway:defaultSchema}.idem_fence_floor) THEN
    PERFORM setval('${flyway:defaultSchema}.idem_fence_floor'::regclass, highest);
  END IF;
  RETURN highest;
END
$$;

-- Run on the fence of a row an external claim has just inserted (its RETURNING, so after any wait
-- for a row being deleted): a fence at or below the floor means expiry raised the floor after the
-- claim read it, perhaps for this very key, so the claim is refused as a serialization failure and
-- made again with the raised floor.
CREATE FUNCTION ${flyway:defaultSchema}.idem_fence_above_floor(fence bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  IF fence <= (SELECT last_value FROM ${flyway:defaultSchema}.idem_fence_floor) THEN
    RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'idem: the fence floor rose under this claim; claim again';
  END IF;
  RETURN fence;
END
$$;

-- The key check every claim runs before it writes. This layout accepts every key, and PostgreSQL
-- folds this one to a constant; the partitioned layout (migration-partitioned) replaces it with one
-- that refuses keys without a UUIDv7 in front, so one code path serves both layouts.
CREATE FUNCTION ${flyway:defaultSchema}.idem_check_key(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT true';

-- The claim of an effect given as statements (executor and inbox), sent with its statements and
-- COMMIT in one round trip: inserts the key's row in claim_table (idem_keys: completed, with the
-- request's fingerprint; idem_inbox: the id), stamped with the statement's time and open for
-- window_micros; or, if the key has a row, raises idem's signal (SQLSTATE IDEM1), so that
-- PostgreSQL skips the statements that follow and rolls the round trip back having written
-- nothing (no dead tuple, no transaction id). The signal's detail says what the claim saw:
-- 'R <completed> <now>' (epoch seconds) for a completed row of the same request within its window
-- as of the statement's start, empty for anything else, which idem then reads in a statement of
-- its own. The row is read only when the insert found one, and in a snapshot of its own (the
-- function is volatile), so a row a copy committed while the insert waited is seen.
-- The insert waits on a copy in flight for at most `wait` (a lock_timeout), and the caller's
-- lock_timeout is back when the function returns. PostgreSQL arms statement_timeout when a
-- statement starts, so no statement can lift it for its own wait: where the session has one, the
-- function raises the signal with the detail 'S' before it writes, and idem sends the statement
-- before it that turns statement_timeout off (saving both settings in idem.lock_timeout and
-- idem.statement_timeout); `wait` is then null, and the function puts both back.
CREATE FUNCTION ${flyway:defaultSchema}.idem_claim(claim_table text, claim_scope text, claim_key text,
  claim_fingerprint bytea, window_micros bigint, wait text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  saved text;
  seen text;
BEGIN
  IF wait IS NOT NULL THEN
    IF current_setting('statement_timeout') <> '0' THEN
      RAISE EXCEPTION USING ERRCODE = 'IDEM1', MESSAGE = 'idem: the claim needs statement_timeout off', DETAIL = 'S';
    END IF;
    saved := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', wait, true);
  END IF;
  IF claim_table = 'idem_keys' THEN
    INSERT INTO ${flyway:defaultSchema}.idem_keys (scope, key, fingerprint, state, created_at, expires_at)
    SELECT claim_scope, claim_key, claim_fingerprint, 'C', statement_timestamp(),
      statement_timestamp() + window_micros * interval '1 microsecond'
    WHERE ${flyway:defaultSchema}.idem_check_key(claim_key)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      seen := coalesce((SELECT 'R ' || date_part('epoch', coalesce(k.completed_at, k.created_at))
          || ' ' || date_part('epoch', clock_timestamp())
        FROM ${flyway:defaultSchema}.idem_keys k
        WHERE k.scope = claim_scope AND k.key = claim_key AND k.expires_at > statement_timestamp()
          AND k.fingerprint = claim_fingerprint AND k.state = 'C'), '');
    END IF;
  ELSE
    INSERT INTO ${flyway:defaultSchema}.idem_inbox (consumer, message_id, received_at, expires_at)
    SELECT claim_scope, claim_key, statement_timestamp(), statement_timestamp() + window_micros * interval '1 microsecond'
    WHERE ${flyway:defaultSchema}.idem_check_key(claim_key)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      seen := coalesce((SELECT 'R ' || date_part('epoch', i.received_at) || ' ' || date_part('epoch', clock_timestamp())
        FROM ${flyway:defaultSchema}.idem_inbox i
        WHERE i.consumer = claim_scope AND i.message_id = claim_key AND i.expires_at > statement_timestamp()), '');
    END IF;
  END IF;
  IF seen IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'IDEM1', MESSAGE = 'idem: the key already has a row', DETAIL = seen;
  END IF;
  IF wait IS NOT NULL THEN
    RETURN set_config('lock_timeout', saved, true);
  END IF;
  RETURN set_config('lock_timeout', current_setting('idem.lock_timeout'), true)
    || set_config('statement_timeout', current_setting('idem.statement_timeout'), true);
END
$$;

-- The idempotent consumer: one row per (consumer, message id), claimed in the consumer's own
-- transaction, before its effect.
CREATE TABLE ${flyway:defaultSchema}.idem_inbox (
  consumer    text        NOT NULL,
  message_id  text        NOT NULL,
  received_at timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX idem_inbox_expires_at ON ${flyway:defaultSchema}.idem_inbox (expires_at);

-- Creates partitions ahead and drops those whose rows are all past their window; nothing to do in
-- this layout (the partitioned layout replaces it).
CREATE FUNCTION ${flyway:defaultSchema}.idem_maintain_partitions(ahead interval, keep interval)
RETURNS TABLE (created integer, dropped integer)
LANGUAGE sql AS $$ SELECT 0, 0 $$;

-- The transactional outbox: messages written in the caller's transaction, with ids minted there;
-- relays claim unsent rows with FOR UPDATE SKIP LOCKED (never "id > last seen": ids commit out of order).
CREATE TABLE ${flyway:defaultSchema}.idem_outbox (
  id              uuid        PRIMARY KEY,
  -- the order the database wrote the messages in: what an ordered relay publishes each aggregate
  -- key's messages by (never the ids, minted from the clocks of the JVMs that enqueued them)
  seq             bigint      GENERATED ALWAYS AS IDENTITY,
  topic           text        NOT NULL,
  aggregate_key   text,
  payload         bytea       NOT NULL,
  header_names    text[]      NOT NULL DEFAULT '{}',
  header_values   text[]      NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- 'P' pending, 'S' sent, 'X' parked after too many failed attempts
  status          char(1)     NOT NULL DEFAULT 'P',
  attempts        integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  sent_at         timestamptz,
  CONSTRAINT idem_outbox_status CHECK (status IN ('P', 'S', 'X'))
);
CREATE INDEX idem_outbox_pending ON ${flyway:defaultSchema}.idem_outbox (next_attempt_at, seq) WHERE status = 'P';
CREATE INDEX idem_outbox_sent ON ${flyway:defaultSchema}.idem_outbox (sent_at) WHERE status = 'S';
-- An ordered relay asks, for each candidate, whether an older unsent message of its aggregate key
-- exists; this index answers that without scanning the key's sent history.
CREATE INDEX idem_outbox_unsent_by_key ON ${flyway:defaultSchema}.idem_outbox (aggregate_key, seq) WHERE status <> 'S' AND aggregate_key IS NOT NULL;

-- The outbox as Debezium's Outbox Event Router reads it, for Idem.builder(..).outboxLayout(OutboxLayout.DEBEZIUM):
-- the router's default columns (id, aggregatetype, aggregateid, type, payload), and the message's
-- headers. Idem inserts each message and deletes it again in the enqueuing transaction: the
-- write-ahead log carries the insert to Debezium, the table stays empty (no relay state, no
-- expiry, no bloat), and no row is ever updated, which the router would refuse. Debezium must be
-- reading (its replication slot created) before messages are written: an insert the slot did not
-- see is gone.
CREATE TABLE ${flyway:defaultSchema}.idem_outbox_events (
  -- minted at enqueue (UUIDv7), as in idem_outbox; the router carries it as the record header "id"
  id            uuid  PRIMARY KEY,
  -- the message's topic: the router routes by it
  aggregatetype text  NOT NULL,
  -- the message's aggregate key: the router makes it the record key (order per key); null without one
  aggregateid   text,
  -- the message's "type" header, or '' when it has none
  type          text  NOT NULL,
  payload       bytea NOT NULL,
  -- every header of the message, as a JSON object of strings
  headers       jsonb NOT NULL
);

-- Leases on named resources. The row outlives its holders (release clears the holder, never the
-- row) so the fencing token only grows: every grant sets token = token + 1.
CREATE TABLE ${flyway:defaultSchema}.idem_leases (
  resource        text        PRIMARY KEY,
  -- null when released
  holder          text,
  token           bigint      NOT NULL,
  -- decided by the database clock (clock_timestamp()), never a JVM's
  expires_at      timestamptz NOT NULL,
  -- the holder the latest grant took over from after its lease ended; null if the lease was free
  previous_holder text,
  CONSTRAINT idem_leases_token CHECK (token >= 1)
);

-- Per-entity sequences: the highest sequence number applied, one row per (stream, entity), kept
-- forever.
CREATE TABLE ${flyway:defaultSchema}.idem_sequences (
  stream       text   NOT NULL,
  entity       text   NOT NULL,
  last_applied bigint NOT NULL,
  PRIMARY KEY (stream, entity),
  CONSTRAINT idem_sequences_last_applied CHECK (last_applied >= 1)
);

-- Caps per recipient for notifications (Notifications with a Cap): one row per (cap, recipient),
-- holding the times of the sends within the cap's window, oldest first, at most its limit. A send
-- takes its place with one INSERT ... ON CONFLICT DO UPDATE ... WHERE (count in window) < limit,
-- which locks the row, so concurrent senders never exceed the limit. Times are the database clock.
CREATE TABLE ${flyway:defaultSchema}.idem_notification_caps (
  cap       text          NOT NULL,
  recipient text          NOT NULL,
  sent_at   timestamptz[] NOT NULL,
  PRIMARY KEY (cap, recipient)
);

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
