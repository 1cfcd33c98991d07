#!/usr/bin/env bash
# cargo-lambda from PyPI, pinned, in its own venv in the per-user tool cache
# (scripts/install-lock.sh); created on first use. Prints the directory to put on PATH (cargo finds `cargo lambda` there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="1.9.2"
. "$root/scripts/install-lock.sh"
venv="$tools_root/cargo-lambda-$version"
stamp="$venv/.wsdr-cargo-lambda-$version"
install_lock cargo-lambda
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "cargo-lambda==$version" >&2
  touch "$stamp"
fi
echo "$venv/bin"
