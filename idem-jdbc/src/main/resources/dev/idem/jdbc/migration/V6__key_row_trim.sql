-- A smaller key row (docs/scale.md#sizing-rate--window): 13 bytes less per local effect's key, 16
-- once the row is aligned to 8 bytes. The type change of state rewrites idem_keys once: on a large
-- existing table it takes a while and locks the table; run it in a quiet hour.

-- No hour column: the partitioned layout files a key by the key itself (V4_1), and in the default
-- layout the hour was always 0. Dropping a column does not rewrite the table: old rows keep their
-- 4 bytes until they are expired, new rows are written without them.
ALTER TABLE ${flyway:defaultSchema}.idem_keys DROP COLUMN key_hour;
ALTER TABLE ${flyway:defaultSchema}.idem_inbox DROP COLUMN key_hour;
DROP FUNCTION ${flyway:defaultSchema}.idem_key_hour(text);

-- A local effect's row has no fencing token (null): nothing is ever fenced by it, since its effect
-- committed with its claim. An external claim writes its token explicitly (above the fence floor),
-- and one that re-claims a local row starts above the floor too (greatest ignores the null).
ALTER TABLE ${flyway:defaultSchema}.idem_keys ALTER COLUMN fence DROP NOT NULL, ALTER COLUMN fence DROP DEFAULT;

-- The state ('I' in flight, 'C' completed) in PostgreSQL's one-byte "char" instead of char(1),
-- which carries a length byte: the row of a local effect with a small result then ends at 120
-- bytes instead of 121, which alignment would round up to 128.
ALTER TABLE ${flyway:defaultSchema}.idem_keys ALTER COLUMN state TYPE "char" USING state::"char";

-- The key check every claim runs before it writes: the partitioned layout made its own (V4_1),
-- which refuses keys without a UUIDv7 in front; the default layout accepts every key, and
-- PostgreSQL folds this one to a constant.
DO $$
BEGIN
  IF to_regprocedure('${flyway:defaultSchema}.idem_check_key(text)') IS NULL THEN
    CREATE FUNCTION ${flyway:defaultSchema}.idem_check_key(key text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT true';
  END IF;
END
$$;
