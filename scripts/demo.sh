#!/usr/bin/env bash
# Local demo: a SQLite database in var/, the example operator file applied, the service running.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="$(scripts/uv.sh)"
mkdir -p var
export CHAINROUTER_DATABASE_URL="${CHAINROUTER_DATABASE_URL:-sqlite:///var/demo.db}"
"$UV" run chainrouter migrate
"$UV" run chainrouter apply examples/operator.yaml
echo
echo "Management API health: curl -s http://127.0.0.1:8080/health"
echo "Stop with Ctrl-C."
exec "$UV" run chainrouter serve --role api
