-- (c) the key read a replay sends (auto-commit, one round trip).
\set k random(0, 1999)
select false as claimed, fence, fingerprint, state, result, date_part('epoch', completed_at), date_part('epoch', lease_expires_at), date_part('epoch', expires_at), date_part('epoch', statement_timestamp()) from idem_pgbench.idem_keys where scope = 'bench/replay' and key = 'key-' || :k;
