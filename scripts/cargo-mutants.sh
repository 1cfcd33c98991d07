#!/usr/bin/env bash
# cargo-mutants, pinned, installed from crates.io into the per-user tool cache
# (scripts/install-lock.sh) on first use
# (cargo install --locked: the versions its own lock file names). Prints the directory to put
# on PATH (cargo finds `cargo mutants` there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${CARGO_MUTANTS_VERSION:-27.1.0}"
. "$root/scripts/install-lock.sh"
dir="$tools_root/cargo-mutants-$version"
stamp="$dir/.wsdr-cargo-mutants-$version"
install_lock cargo-mutants
if [ ! -f "$stamp" ]; then
  rm -rf "$dir"
  # Its own target directory: never the workspace's (whose RUSTC_WORKSPACE_WRAPPER, if set,
  # would lint cargo-mutants' sources).
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS CARGO_TARGET_DIR="$root/target/cargo-mutants-build" \
    cargo install --quiet --locked --root "$dir" --version "$version" cargo-mutants >&2
  touch "$stamp"
fi
echo "$dir/bin"
