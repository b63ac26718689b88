-- The executor benchmark's payment table, and 2,000 completed keys to replay in the key table
-- that run.sh creates first from the library's own migrations (schema idem_pgbench).
CREATE TABLE idem_pgbench.payments (id bigserial PRIMARY KEY, request text NOT NULL, amount int NOT NULL);
INSERT INTO idem_pgbench.payments (request, amount) SELECT 'seed-' || i, i FROM generate_series(1, 10000) i;
INSERT INTO idem_pgbench.idem_keys (scope, key, fingerprint, state, result, completed_at, expires_at)
  SELECT 'bench/replay', 'key-' || i, sha256(''::bytea), 'C', convert_to('payment-' || i, 'UTF8'),
         now(), now() + interval '1 day'
  FROM generate_series(0, 1999) i;
VACUUM ANALYZE idem_pgbench.payments, idem_pgbench.idem_keys;
