#!/usr/bin/env bash
# Installs the npm packages of package-lock.json (anvil and cast) into node_modules/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is needed for anvil and cast (real EVM nodes for the demo and the tests)." >&2
  echo "Install Node.js 18 or newer, e.g.: sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
# `npm ci`: exactly what the lock file says, and the lock file left as committed (`npm install`
# rewrites it). The lock lists the foundry packages' optional binaries for every platform, as
# `npm install` writes them; without those entries `npm ci` refuses the lock.
npm ci --no-audit --no-fund --loglevel=error
