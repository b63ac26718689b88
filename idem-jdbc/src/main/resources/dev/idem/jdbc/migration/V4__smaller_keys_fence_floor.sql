-- Remembering at scale (docs/scale.md): a smaller key row, the column every claim writes for the
-- partitioned layout, and the fence floor that lets expiry delete external effects' keys.

-- The key table, rebuilt with its 8-byte columns first (no alignment padding between them or
-- after a text column), fingerprints of 16 bytes (the first half of the SHA-256: 128 bits still
-- tell two requests apart) and no completed_at for a local effect's row (its effect commits with
-- the claim, so it completed when it was created: readers take coalesce(completed_at, created_at)).
CREATE TABLE ${flyway:defaultSchema}.idem_keys_v4 (
  -- fencing token of the current claim; a new external row starts above the fence floor
  fence            bigint      NOT NULL DEFAULT 1,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  -- external effects only: when the result was recorded (a local effect's is created_at)
  completed_at     timestamptz,
  -- external effects: when the holder's claim ends (database clock); NULL once completed
  lease_expires_at timestamptz,
  -- the hour (since the epoch) of the time the key carries: what the partitioned layout files the
  -- row under (idem_key_hour); 0 in this, the default, layout
  key_hour         integer     NOT NULL DEFAULT 0,
  scope            text        NOT NULL,
  key              text        NOT NULL,
  fingerprint      bytea       NOT NULL,
  -- 'I' in flight (external effects between phase 1 and 3), 'C' completed. No CHECK: see V1.
  state            char(1)     NOT NULL,
  -- external effects: the persisted intent, the key the call sends to the provider
  call_key         text,
  result           bytea,
  CONSTRAINT idem_keys_v4_pkey PRIMARY KEY (scope, key)
);
INSERT INTO ${flyway:defaultSchema}.idem_keys_v4 (fence, created_at, expires_at, completed_at, lease_expires_at, key_hour,
    scope, key, fingerprint, state, call_key, result)
  SELECT fence, created_at, expires_at, CASE WHEN call_key IS NULL THEN NULL ELSE completed_at END, lease_expires_at, 0,
    scope, key, substring(fingerprint FROM 1 FOR 16), state, call_key, result
  FROM ${flyway:defaultSchema}.idem_keys;
DROP TABLE ${flyway:defaultSchema}.idem_keys;
ALTER TABLE ${flyway:defaultSchema}.idem_keys_v4 RENAME TO idem_keys;
ALTER TABLE ${flyway:defaultSchema}.idem_keys RENAME CONSTRAINT idem_keys_v4_pkey TO idem_keys_pkey;
CREATE INDEX idem_keys_expires_at ON ${flyway:defaultSchema}.idem_keys (expires_at);

-- The inbox gets the same column; existing rows read the default without being rewritten.
ALTER TABLE ${flyway:defaultSchema}.idem_inbox ADD COLUMN key_hour integer NOT NULL DEFAULT 0;

-- The hour a key is filed under. In this layout every key is filed under 0, so one code path serves
-- both layouts; the partitioned layout (migration-partitioned) replaces it with the hour of the
-- key's UUIDv7. Immutable, so a lookup names the one partition a key can be in.
CREATE FUNCTION ${flyway:defaultSchema}.idem_key_hour(key text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 0 $$;

-- Creates partitions ahead and drops those whose rows are all past their window; nothing to do in
-- this layout (the partitioned layout replaces it).
CREATE FUNCTION ${flyway:defaultSchema}.idem_maintain_partitions(ahead interval, keep interval)
RETURNS TABLE (created integer, dropped integer)
LANGUAGE sql AS $$ SELECT 0, 0 $$;

-- The fence floor: at least every fence of every key row expiry ever deleted. A sequence, read
-- through last_value, because a sequence is not transactional: a claim that started before expiry
-- raised the floor still sees the raised value once it has inserted (idem_fence_above_floor).
-- Expiry raises it before its delete commits (idem_raise_fence_floor), so a key re-created after
-- its row was deleted gets a fence above any a stale holder of the deleted row could present.
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
