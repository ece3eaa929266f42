#!/usr/bin/env bash
# `make image`: the service as an OCI image (docs/deployment.md, "An image"), built with buildah
# from a Debian base that debootstrap makes (no container registry is needed): Debian's
# python3.11, the locked dependencies in /opt/chainrouter/.venv, this checkout's package (with
# its native module and dashboard bundle, built by `make setup`), and `chainrouter` as the
# entrypoint, so that the roles are its commands (`serve --role rpc`, `migrate`, ...).
#
#   scripts/image.sh build       build the image IMAGE (default chainrouter:latest)
#   scripts/image.sh smoke       run it: --help, then migrate and serve --role rpc in its root
#                                filesystem (chroot: this machine cannot start containers),
#                                answering GET /health
#
# The base's root filesystem is kept in var/image/rootfs between builds (a few minutes to make).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-chainrouter:latest}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=var/image/rootfs
APP=/opt/chainrouter

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "installing $2" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  }
}

base() {
  [ -f "$BASE/.complete" ] && return
  need debootstrap debootstrap
  rm -rf "$BASE"
  mkdir -p "$BASE"
  echo "making the Debian $SUITE base (debootstrap)" >&2
  debootstrap --variant=minbase --include=python3.11,ca-certificates "$SUITE" "$BASE" "$MIRROR" >&2
  rm -rf "$BASE"/var/cache/apt/archives/*.deb "$BASE"/var/lib/apt/lists/*
  touch "$BASE/.complete"
}

build() {
  need buildah buildah
  [ -f .venv/bin/python ] && ls src/chainrouter/_native*.so >/dev/null 2>&1 \
    || { echo "run make setup first (the native module is copied into the image)" >&2; exit 1; }
  base
  local ctr mnt site
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' RETURN
  mnt=$(buildah mount "$ctr")
  cp -a "$BASE"/. "$mnt"/
  rm -f "$mnt/.complete"
  # The dependencies exactly as locked, into a venv on the image's own interpreter (the same
  # Debian python3.11 as here: its path is the same inside).
  scripts/uv.sh >/dev/null
  local uv
  uv=$(scripts/uv.sh)
  "$uv" venv --quiet --python /usr/bin/python3.11 "$mnt$APP/.venv"
  "$uv" export --quiet --frozen --no-dev --no-emit-project --format requirements-txt \
    > "$mnt/tmp/requirements.txt"
  "$uv" pip install --quiet --python "$mnt$APP/.venv/bin/python" -r "$mnt/tmp/requirements.txt"
  rm "$mnt/tmp/requirements.txt"
  site=$(echo "$mnt$APP"/.venv/lib/python3.11/site-packages)
  # The package itself, as this checkout built it (not editable: nothing points back here).
  tar -C src --exclude=__pycache__ -cf - chainrouter | tar -C "$site" -xf -
  printf '#!%s/.venv/bin/python\nimport sys\nfrom chainrouter.cli import main\nsys.exit(main())\n' \
    "$APP" > "$mnt$APP/.venv/bin/chainrouter"
  chmod 755 "$mnt$APP/.venv/bin/chainrouter"
  mkdir -p "$mnt/var/lib/chainrouter"
  buildah umount "$ctr" >/dev/null
  buildah config \
    --entrypoint "[\"$APP/.venv/bin/chainrouter\"]" \
    --cmd serve \
    --workingdir /var/lib/chainrouter \
    --env CHAINROUTER_RPC_HOST=0.0.0.0 \
    --env CHAINROUTER_API_HOST=0.0.0.0 \
    --env CHAINROUTER_LOG_FORMAT=json \
    --port 8545 --port 8080 \
    --label org.opencontainers.image.title=chainrouter \
    "$ctr"
  buildah commit --quiet "$ctr" "$IMAGE" >/dev/null
  echo "built $IMAGE" >&2
}

smoke() {
  need buildah buildah
  buildah inspect --type image "$IMAGE" >/dev/null 2>&1 || build
  # Globals, not locals: the EXIT trap runs after this function has returned.
  status=1
  ctr=$(buildah from "$IMAGE")
  mnt=$(buildah mount "$ctr")
  mount -t proc proc "$mnt/proc"
  # shellcheck disable=SC2317  # run by the trap
  cleanup() {
    if [ -n "${server:-}" ]; then
      kill "$server" 2>/dev/null || true
      wait "$server" 2>/dev/null || true
    fi
    umount "$mnt/proc" 2>/dev/null || true
    buildah umount "$ctr" >/dev/null 2>&1 || true
    buildah rm "$ctr" >/dev/null 2>&1 || true
  }
  trap cleanup EXIT
  entry=$(buildah inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$IMAGE" \
    | tr -d '[]')
  in_image() {
    chroot "$mnt" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/var/lib/chainrouter \
      CHAINROUTER_DATABASE_URL=sqlite:////var/lib/chainrouter/smoke.db \
      CHAINROUTER_RPC_HOST=127.0.0.1 CHAINROUTER_RPC_PORT="$port" \
      CHAINROUTER_USAGE_JOURNAL_DIR=/var/lib/chainrouter/usage-journal "$@"
  }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  in_image "$entry" --help | head -n 3
  in_image "$entry" migrate
  in_image "$entry" serve --role rpc &
  server=$!
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/health" 2>/dev/null; then status=0; break; fi
    sleep 0.2
  done
  echo
  [ "$status" = 0 ] && echo "image smoke test passed: $IMAGE answers /health" >&2 \
    || echo "image smoke test FAILED: no /health answer" >&2
  return "$status"
}

case "${1:-build}" in
  build) build ;;
  smoke) smoke ;;
  *) echo "usage: $0 build|smoke" >&2; exit 2 ;;
esac
