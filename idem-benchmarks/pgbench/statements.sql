-- (b) executorNewKey as the executor sends it: the effect given as a statement, so BEGIN, the wait
-- bound saved and set, the completed key row (its RETURNING restores the bound), the payment
-- insert and COMMIT go in one pipeline, one round trip, the claim first.
\set n random(1, 9000000000000000000)
\startpipeline
BEGIN;
select set_config('lock_timeout', '2000ms', true) from (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true)) as saved;
insert into idem_pgbench.idem_keys (scope, key, fingerprint, state, fence, lease_expires_at, call_key, result, created_at, completed_at, expires_at)
  values ('bench/new', 'k-' || :n, '\xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'::bytea, 'C', 1, null, null, null, statement_timestamp(), statement_timestamp(), statement_timestamp() + 86400000000 * interval '1 microsecond')
  returning set_config('lock_timeout', current_setting('idem.lock_timeout'), true);
INSERT INTO idem_pgbench.payments (request, amount) VALUES ('req-' || :n, 100);
COMMIT;
\endpipeline
