-- Not what idem sends: an alternative measured and not taken (docs/benchmarks.md). The same promise as
-- the claim before the effect (a copy waits before its effect runs), by a transaction-scoped advisory
-- lock on the key and a read, and the completed key row written with COMMIT. Still three round trips.
\set n random(1, 9000000000000000000)
\startpipeline
BEGIN;
select set_config('lock_timeout', '2000ms', true) from (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true)) as saved;
select pg_advisory_xact_lock(hashtextextended('bench/lock' || 'k-' || :n, 0));
select false as claimed, fence, fingerprint, state, result, date_part('epoch', completed_at), date_part('epoch', lease_expires_at), date_part('epoch', expires_at), date_part('epoch', statement_timestamp()) from idem_pgbench.idem_keys where scope = 'bench/lock' and key = 'k-' || :n;
select set_config('lock_timeout', current_setting('idem.lock_timeout'), true);
\endpipeline
INSERT INTO idem_pgbench.payments (request, amount) VALUES ('req-' || :n, 100) RETURNING id;
\startpipeline
insert into idem_pgbench.idem_keys (scope, key, fingerprint, state, fence, lease_expires_at, call_key, result, created_at, completed_at, expires_at)
  values ('bench/lock', 'k-' || :n, '\xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'::bytea, 'C', 1, null, null, convert_to('payment-' || :n, 'UTF8'), statement_timestamp(), statement_timestamp(), statement_timestamp() + 86400000000 * interval '1 microsecond');
COMMIT;
\endpipeline
