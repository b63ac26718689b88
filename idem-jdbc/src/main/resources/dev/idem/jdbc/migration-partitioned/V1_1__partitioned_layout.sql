-- The partitioned layout (docs/scale.md#the-partitioned-layout), chosen at the first migration by
-- adding this location (IdemFlyway.migrate(dataSource, schema, IdemFlyway.Layout.PARTITIONED)).
-- The key table and the inbox are partitioned by their keys: a key must begin with a UUIDv7 in
-- lowercase, whose first 48 bits (its first 12 hex digits) are its creation time in milliseconds,
-- so under the byte order of the "C" collation the keys of a day form one range of text. The
-- primary key (scope, key) includes the partition key, as PostgreSQL requires of a partitioned
-- table's unique index, and adds nothing to it; since a key's partition is decided by the key
-- alone, every copy of a key, whenever it arrives, lands in the same partition, where the primary
-- key admits one row: one claim per key across partitions.
-- Daily partitions are created ahead and dropped once every row in them is past its window
-- (idem_maintain_partitions, Operations.maintainPartitions).

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM ${flyway:defaultSchema}.idem_keys) OR EXISTS (SELECT 1 FROM ${flyway:defaultSchema}.idem_inbox) THEN
    RAISE EXCEPTION 'idem: the partitioned layout is chosen at the first migration, and idem_keys or idem_inbox'
      ' already has rows: keep the default layout, or move to the partitioned one as docs/scale.md describes';
  END IF;
END
$$;

CREATE FUNCTION ${flyway:defaultSchema}.idem_refuse_key(key text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'IDEM2', MESSAGE = format('key %s does not begin with a UUIDv7 in lowercase'
    ' (8-4-4-4-12 hex digits, version 7): the partitioned layout files each key under the time in it;'
    ' use a UUIDv7 as the key, or as the prefix of a key derived from it (docs/scale.md)', quote_literal(key));
END
$$;

-- What every claim checks its key with before it writes (replacing the default layout's, which
-- accepts every key): a key without a lowercase UUIDv7 in front is refused with a clear message
-- instead of PostgreSQL's "no partition" (or, uppercase, a partition of another day).
CREATE OR REPLACE FUNCTION ${flyway:defaultSchema}.idem_check_key(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN key ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}'
    THEN true ELSE ${flyway:defaultSchema}.idem_refuse_key(key) END
$$;

-- The first key of a day's range: the 13 characters of a UUIDv7 that carry the day's first
-- millisecond ('0192a3b4-c5d6'); every key of the day compares at or above it under "C".
CREATE FUNCTION ${flyway:defaultSchema}.idem_key_floor(day date) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4)
  FROM lpad(to_hex((extract(epoch FROM day::timestamp) * 1000)::bigint), 12, '0') AS h
$$;

-- The same columns as the default layout's tables, with the key compared byte by byte (collation
-- "C", which is also what makes a day's keys one range), partitioned by the key. No index on
-- expires_at: whole partitions are dropped instead of rows deleted. Keys of one partition arrive
-- in about the order of their times, so the primary key's pages are filled whole (fillfactor 100).
ALTER TABLE ${flyway:defaultSchema}.idem_keys ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE ${flyway:defaultSchema}.idem_inbox ALTER COLUMN message_id TYPE text COLLATE "C";
CREATE TABLE ${flyway:defaultSchema}.idem_keys_partitioned (LIKE ${flyway:defaultSchema}.idem_keys INCLUDING DEFAULTS)
  PARTITION BY RANGE (key);
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_partitioned (LIKE ${flyway:defaultSchema}.idem_inbox INCLUDING DEFAULTS)
  PARTITION BY RANGE (message_id);
DROP TABLE ${flyway:defaultSchema}.idem_keys;
DROP TABLE ${flyway:defaultSchema}.idem_inbox;
ALTER TABLE ${flyway:defaultSchema}.idem_keys_partitioned RENAME TO idem_keys;
ALTER TABLE ${flyway:defaultSchema}.idem_inbox_partitioned RENAME TO idem_inbox;
ALTER TABLE ${flyway:defaultSchema}.idem_keys
  ADD CONSTRAINT idem_keys_pkey PRIMARY KEY (scope, key) WITH (fillfactor = 100);
ALTER TABLE ${flyway:defaultSchema}.idem_inbox
  ADD CONSTRAINT idem_inbox_pkey PRIMARY KEY (consumer, message_id) WITH (fillfactor = 100);

-- Creates the daily partitions from yesterday (UTC) to now + ahead, and drops each older one
-- whose day ended at least `keep` ago and whose rows are all past their window, none of them an
-- external claim in flight (an unknown outcome stays for the operator). It never drops yesterday's
-- or a later partition, and never creates one before yesterday: so a dropped day is never created
-- again, and a late copy of a key of that day is refused (no partition), never run again.
CREATE OR REPLACE FUNCTION ${flyway:defaultSchema}.idem_maintain_partitions(ahead interval, keep interval)
RETURNS TABLE (created integer, dropped integer)
LANGUAGE plpgsql AS $$
DECLARE
  today date := (clock_timestamp() AT TIME ZONE 'UTC')::date;
  tbl text;
  day date;
  part record;
  droppable boolean;
  n_created integer := 0;
  n_dropped integer := 0;
BEGIN
  FOREACH tbl IN ARRAY ARRAY['idem_keys', 'idem_inbox'] LOOP
    day := today - 1;
    WHILE day <= ((clock_timestamp() + ahead) AT TIME ZONE 'UTC')::date LOOP
      IF to_regclass(format('%I.%I', '${flyway:defaultSchema}', tbl || '_p' || to_char(day, 'YYYYMMDD'))) IS NULL THEN
        EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES FROM (%s) TO (%s)',
          '${flyway:defaultSchema}', tbl || '_p' || to_char(day, 'YYYYMMDD'), '${flyway:defaultSchema}', tbl,
          quote_literal(${flyway:defaultSchema}.idem_key_floor(day)), quote_literal(${flyway:defaultSchema}.idem_key_floor(day + 1)));
        n_created := n_created + 1;
      END IF;
      day := day + 1;
    END LOOP;
    FOR part IN
      SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = format('%I.%I', '${flyway:defaultSchema}', tbl)::regclass
        AND c.relname ~ ('^' || tbl || '_p[0-9]{8}$')
      ORDER BY c.relname
    LOOP
      day := to_date(right(part.relname, 8), 'YYYYMMDD');
      CONTINUE WHEN day >= today - 1 OR ((day + 1)::timestamp AT TIME ZONE 'UTC') + keep > clock_timestamp();
      EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I.%I WHERE expires_at > clock_timestamp()%s)',
        '${flyway:defaultSchema}', part.relname, CASE WHEN tbl = 'idem_keys' THEN ' OR state <> ''C''' ELSE '' END)
        INTO droppable;
      IF droppable THEN
        -- DROP waits for the claims that hold the table (and makes new ones queue behind it): a
        -- short bound, and a partition it could not lock is left for the next run.
        BEGIN
          PERFORM set_config('lock_timeout', '2s', true);
          EXECUTE format('DROP TABLE %I.%I', '${flyway:defaultSchema}', part.relname);
          n_dropped := n_dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
          RAISE NOTICE 'idem: partition % is busy; it is dropped by a later run', part.relname;
        END;
      END IF;
    END LOOP;
  END LOOP;
  RETURN QUERY SELECT n_created, n_dropped;
END
$$;

SELECT * FROM ${flyway:defaultSchema}.idem_maintain_partitions(interval '7 days', interval '1 day');
