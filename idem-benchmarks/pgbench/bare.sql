-- (a) bareEffect as pgjdbc sends it: BEGIN with the insert (one round trip), then COMMIT.
\set n random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO idem_pgbench.payments (request, amount) VALUES ('req-' || :n, 100) RETURNING id;
\endpipeline
COMMIT;
