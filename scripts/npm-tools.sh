#!/usr/bin/env bash
# Installs the npm packages of package-lock.json (anvil and cast) into node_modules/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is needed for anvil and cast (real EVM nodes for the demo and the tests)." >&2
  echo "Install Node.js 18 or newer, e.g.: sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
# Not `npm ci`: the foundry packages list optional per-platform binaries that npm leaves out of
# the lock file, and `npm ci` then refuses the lock. `npm install` follows the lock as written.
npm install --no-audit --no-fund --loglevel=error
