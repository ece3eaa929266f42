#!/usr/bin/env bash
# Makes sure the local PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) that the test suite
# uses are running, starting them when they are installed but down.
set -euo pipefail

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

if ! postgres_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  else
    echo "PostgreSQL is not installed: apt-get install postgresql (see README)" >&2
    exit 1
  fi
  for _ in $(seq 1 30); do postgres_up && break; sleep 1; done
  postgres_up || { echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2; exit 1; }
fi

if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "starting Redis" >&2
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  else
    echo "Redis is not installed: apt-get install redis-server (see README)" >&2
    exit 1
  fi
  for _ in $(seq 1 30); do redis_up && break; sleep 1; done
  redis_up || { echo "Redis did not come up on 127.0.0.1:6379" >&2; exit 1; }
fi

# HAProxy, the balancer of the deployment recipe (deploy/, docs/deployment.md), for the multi-host
# test; only its binary is used (the test starts its own), so Debian's service is left stopped.
if ! command -v haproxy >/dev/null 2>&1; then
  echo "installing HAProxy" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq haproxy >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq haproxy >/dev/null; }
fi

# iptables, with which the multi-host test cuts one router off from Redis (a network partition).
if ! command -v iptables >/dev/null 2>&1 && [ ! -x /usr/sbin/iptables ]; then
  echo "installing iptables" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq iptables >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq iptables >/dev/null; }
fi
