-- (b1) executorNewKeyCallback as the executor sends it (the default ClaimOrder.BEFORE_EFFECT): BEGIN, the wait
-- bound saved and set, the key claimed, the bound restored; then the effect; then the result and COMMIT.
\set n random(1, 9000000000000000000)
\startpipeline
BEGIN;
select set_config('lock_timeout', '2000ms', true) from (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true)) as saved;
insert into idem_pgbench.idem_keys (scope, key, fingerprint, state, fence, lease_expires_at, call_key, result, created_at, completed_at, expires_at)
  values ('bench/new', 'k-' || :n, '\xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'::bytea, 'C', 1, null, null, null, statement_timestamp(), statement_timestamp(), statement_timestamp() + 86400000000 * interval '1 microsecond')
  on conflict do nothing returning true, fence;
select set_config('lock_timeout', current_setting('idem.lock_timeout'), true);
\endpipeline
INSERT INTO idem_pgbench.payments (request, amount) VALUES ('req-' || :n, 100) RETURNING id;
\startpipeline
update idem_pgbench.idem_keys set result = convert_to('payment-' || :n, 'UTF8'), completed_at = statement_timestamp() where scope = 'bench/new' and key = 'k-' || :n;
COMMIT;
\endpipeline
