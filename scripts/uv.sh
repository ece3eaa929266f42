#!/usr/bin/env bash
# Prints the path of a uv executable, installing a pinned uv into .tools/ when none is on PATH.
# Needs only python3 with venv (Debian: python3-venv); no system-wide pip install.
set -euo pipefail
UV_VERSION="0.13.9"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if command -v uv >/dev/null 2>&1; then
  command -v uv
  exit 0
fi
tools="$root/.tools"
if [ ! -x "$tools/bin/uv" ]; then
  echo "installing uv $UV_VERSION into $tools" >&2
  python3 -m venv "$tools" >&2
  "$tools/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2
fi
echo "$tools/bin/uv"
