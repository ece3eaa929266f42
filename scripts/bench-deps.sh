#!/usr/bin/env bash
# Installs what the benchmarks drive from outside Python: wrk (load), nginx (baseline, upstream)
# with its JavaScript module (the echo upstream of bench/mixed.py) and taskset (pinning processes
# to cores).
set -euo pipefail
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v taskset >/dev/null 2>&1 || missing+=(util-linux)
[ -e /usr/lib/nginx/modules/ngx_http_js_module.so ] || missing+=(libnginx-mod-http-js)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "the benchmarks need: ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
