-- (d) barePkRead.
\set id random(1, 10000)
SELECT request, amount FROM idem_pgbench.payments WHERE id = :id;
