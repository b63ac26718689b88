-- (b2) executorNewKeyAtCommit as the executor sends it: BEGIN with the effect; then the wait bound
-- saved and set, the completed key row (its RETURNING restores the bound) and COMMIT. run.sh
-- drops the lines marked "wait bound" for the variant without it.
\set n random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO idem_pgbench.payments (request, amount) VALUES ('req-' || :n, 100) RETURNING id;
\endpipeline
\startpipeline
select set_config('lock_timeout', '2000ms', true) from (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true)) as saved; -- wait bound
insert into idem_pgbench.idem_keys (scope, key, fingerprint, state, fence, lease_expires_at, call_key, result, created_at, completed_at, expires_at)
  values ('bench/at-commit', 'k-' || :n, '\xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'::bytea, 'C', 1, null, null, convert_to('payment-' || :n, 'UTF8'), statement_timestamp(), statement_timestamp(), statement_timestamp() + 86400000000 * interval '1 microsecond')
  returning set_config('lock_timeout', current_setting('idem.lock_timeout'), true) -- wait bound
  ;
COMMIT;
\endpipeline
