#!/usr/bin/env bash
# Builds the dashboard's script and style (src/chainrouter/api/dashboard/app.js and app.css)
# from its sources in dashboard/src/ and the chart library, with esbuild, both from
# package-lock.json (node_modules/, installed by scripts/npm-tools.sh): offline, and byte for
# byte the same on every machine, so the committed bundles are what this builds (CI checks
# `git diff --exit-code` after `make setup`). `scripts/dashboard.sh OUTDIR` builds into OUTDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
dashboard=src/chainrouter/api/dashboard
out=${1:-$dashboard}
esbuild=node_modules/.bin/esbuild
[[ -x $esbuild ]] || { echo "esbuild is missing: run scripts/npm-tools.sh (make setup)" >&2; exit 1; }
common=(--bundle --charset=utf8 --legal-comments=inline --log-level=warning)
"$esbuild" "$dashboard/src/main.js" "${common[@]}" --format=esm --target=es2020 \
  --outfile="$out/app.js"
"$esbuild" "$dashboard/src/style.css" "${common[@]}" --outfile="$out/app.css"
