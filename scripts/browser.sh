#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (tests/dashboard/), driven headless
# by Playwright for Python (a PyPI package of the dev group, which downloads no browser of its
# own here). As root or through sudo; nothing to do when /usr/bin/chromium is there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "browser tests: installing Debian's chromium" >&2
sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
$sudo apt-get install -y --no-install-recommends chromium >/dev/null \
  || { $sudo apt-get update -qq && $sudo apt-get install -y --no-install-recommends chromium >/dev/null; }
