#!/usr/bin/env bash
# cargo-lambda from PyPI, pinned, in its own venv under .tools/cargo-lambda; created on first
# use. Prints the directory to put on PATH (cargo finds `cargo lambda` there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="1.9.2"
venv="$root/.tools/cargo-lambda"
stamp="$venv/.wsdr-cargo-lambda-$version"
. "$root/scripts/install-lock.sh"
install_lock cargo-lambda
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "cargo-lambda==$version" >&2
  touch "$stamp"
fi
echo "$venv/bin"
