#!/usr/bin/env bash
# Local demo: a SQLite database in var/, the example operator file applied, the service running.
# The demo database is made anew on every run, so the generated keys are printed every time.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="$(scripts/uv.sh)"
mkdir -p var
rm -f var/demo.db var/demo.db-wal var/demo.db-shm
export CHAINROUTER_DATABASE_URL="sqlite:///var/demo.db"
"$UV" run chainrouter migrate
"$UV" run chainrouter apply examples/operator.yaml
echo
echo "Management API health: curl -s http://127.0.0.1:8080/health"
echo "Stop with Ctrl-C."
exec "$UV" run chainrouter serve --role api
