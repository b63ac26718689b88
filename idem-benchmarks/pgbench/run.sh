#!/bin/bash
# The SQL floor under ExecutorBenchmark: the same statements, in the same round trips, sent by
# pgbench (a C client) with 8 clients, so no Java runs. Usage: run.sh [seconds] (default 10), with
# PG* variables or defaults pointing at the server (e.g. PGHOST=127.0.0.1 PGUSER=postgres
# PGDATABASE=test). Needs pgbench 14 or later (pipelines). Prints tps per script and the ratios.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-10}
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
# the library's own migrations, in version order, into the schema idem_pgbench
migrations=$(ls ../../idem-jdbc/src/main/resources/dev/idem/jdbc/migration/V*__*.sql | sort -V)
{ echo "DROP SCHEMA IF EXISTS idem_pgbench CASCADE; CREATE SCHEMA idem_pgbench;"
  for m in $migrations; do sed 's/${flyway:defaultSchema}/idem_pgbench/g' "$m"; echo; done
  cat setup.sql; } | psql -q -v ON_ERROR_STOP=1 >/dev/null
# the claim at commit without the wait bound: at-commit.sql less the lines marked "wait bound"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
grep -v -- '-- wait bound$' at-commit.sql > "$work/at-commit-no-bound.sql"
declare -A tps
for s in bare statements before-effect lock-first at-commit at-commit-no-bound pk-read key-read; do
  f=$s.sql; [ -f "$f" ] || f=$work/$s.sql
  tps[$s]=$(pgbench -n -M prepared -c 8 -j 2 -T "$secs" -f "$f" 2>/dev/null | awk '/^tps/ {print int($3)}')
  echo "$s: ${tps[$s]} tps"
done
awk -v a="${tps[bare]}" -v st="${tps[statements]}" -v be="${tps[before-effect]}" -v lf="${tps[lock-first]}" -v b="${tps[at-commit]}" -v b0="${tps[at-commit-no-bound]}" -v c="${tps[key-read]}" -v d="${tps[pk-read]}" \
  'BEGIN { printf "statements/bare = %.2f\nbefore-effect/bare = %.2f\nlock-first/bare = %.2f\nat-commit/bare = %.2f\nat-commit-no-bound/bare = %.2f\nkey-read/pk-read = %.2f\n", st/a, be/a, lf/a, b/a, b0/a, c/d }'
psql -q -c "DROP SCHEMA idem_pgbench CASCADE" >/dev/null
