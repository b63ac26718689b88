-- The partitioned layout (docs/scale.md#the-partitioned-layout), chosen at the first migration by
-- adding this location (IdemFlyway.migrate(dataSource, schema, IdemFlyway.Layout.PARTITIONED)).
-- The key table and the inbox are partitioned by the time their keys carry: a key must begin with
-- a UUIDv7, whose first 48 bits are its creation time in milliseconds. The hour of that time
-- (key_hour) is part of the primary key, as PostgreSQL requires of a partitioned table's unique
-- index; since it is a function of the key alone, every copy of a key, whenever it arrives, lands in
-- the same partition, where the primary key admits one row: one claim per key across partitions.
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

CREATE FUNCTION ${flyway:defaultSchema}.idem_refuse_key(key text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'IDEM2', MESSAGE = format('key %s does not begin with a UUIDv7'
    ' (8-4-4-4-12 hex digits, version 7): the partitioned layout files each key under the time in it;'
    ' use a UUIDv7 as the key, or as the prefix of a key derived from it (docs/scale.md)', quote_literal(key));
END
$$;

-- The hour since the epoch of the UUIDv7 the key begins with; a key without one is refused.
CREATE OR REPLACE FUNCTION ${flyway:defaultSchema}.idem_key_hour(key text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN key ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}'
    THEN (('x' || substr(key, 1, 8) || substr(key, 10, 4))::bit(48)::bigint / 3600000)::integer
    ELSE ${flyway:defaultSchema}.idem_refuse_key(key) END
$$;

-- The same columns as the default layout's tables (V4), partitioned by key_hour, which has no
-- default here: every claim computes it from the key (idem_key_hour). No index on expires_at:
-- whole partitions are dropped instead of rows deleted. Keys of one partition arrive in about the
-- order of their times, so the primary key's pages are filled whole (fillfactor 100).
CREATE TABLE ${flyway:defaultSchema}.idem_keys_partitioned (LIKE ${flyway:defaultSchema}.idem_keys INCLUDING DEFAULTS)
  PARTITION BY RANGE (key_hour);
CREATE TABLE ${flyway:defaultSchema}.idem_inbox_partitioned (LIKE ${flyway:defaultSchema}.idem_inbox INCLUDING DEFAULTS)
  PARTITION BY RANGE (key_hour);
DROP TABLE ${flyway:defaultSchema}.idem_keys;
DROP TABLE ${flyway:defaultSchema}.idem_inbox;
ALTER TABLE ${flyway:defaultSchema}.idem_keys_partitioned RENAME TO idem_keys;
ALTER TABLE ${flyway:defaultSchema}.idem_inbox_partitioned RENAME TO idem_inbox;
ALTER TABLE ${flyway:defaultSchema}.idem_keys ALTER COLUMN key_hour DROP DEFAULT,
  ADD CONSTRAINT idem_keys_pkey PRIMARY KEY (scope, key, key_hour) WITH (fillfactor = 100);
ALTER TABLE ${flyway:defaultSchema}.idem_inbox ALTER COLUMN key_hour DROP DEFAULT,
  ADD CONSTRAINT idem_inbox_pkey PRIMARY KEY (consumer, message_id, key_hour) WITH (fillfactor = 100);

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
          extract(epoch FROM day::timestamp)::bigint / 3600, extract(epoch FROM day::timestamp)::bigint / 3600 + 24);
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
