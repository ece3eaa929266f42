#!/usr/bin/env bash
# Build chainrouter._native (native/, Rust: the native executor) into src/chainrouter/ for the
# interpreter given as $1; with `test` as $2, run the crate's own tests instead (`cargo test`,
# linked against that interpreter's libpython). Its crates come from Debian's packages
# (native/.cargo/config.toml): they are installed here when missing, as root or through sudo.
# Skipped, with a note, when CHAINROUTER_NO_NATIVE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(realpath "$1")
if [[ "${CHAINROUTER_NO_NATIVE:-}" == "1" ]]; then
    echo "native server: not built (CHAINROUTER_NO_NATIVE=1)"
    exit 0
fi
packages=(librust-pyo3-dev librust-hyper-dev librust-tokio-dev librust-tokio-rustls-dev
          librust-futures-util-dev librust-libc-dev librust-rustls-dev librust-httparse-dev
          librust-bytes-dev librust-base64-dev librust-rustls-native-certs-dev
          librust-rustls-pemfile-dev)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "native server: installing ${missing[*]}"
    sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
    $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if [[ "${2:-}" == "test" ]]; then
    # The module Python imports leaves libpython to the interpreter; a test binary links it.
    cd native && PYO3_PYTHON="$python" exec "$cargo" test --quiet --release --no-default-features
fi
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
target=src/chainrouter/_native$suffix
# cargo decides itself whether anything changed; the copy only happens when the library did.
# It reads its configuration from the working directory's tree, hence the cd.
(cd native && PYO3_PYTHON="$python" "$cargo" build --quiet --release)
built=native/target/release/lib_native.so
if [[ ! -e "$target" || "$built" -nt "$target" ]]; then
    # A new file renamed into place: a router still running keeps the module it mapped (copied
    # over in place, its pages change under it and it dies).
    cp "$built" "$target.new"
    mv -f "$target.new" "$target"
    echo "native server: built $target"
else
    echo "native server: build is up to date"
fi
