#!/usr/bin/env bash
# A venv with the offline policy scanners, pinned, in the per-user tool cache (scripts/install-lock.sh) (apart from the test
# tools' venv: checkov pins its own versions of libraries the tests use); created on first
# use. Prints its bin directory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/install-lock.sh"
venv="$tools_root/scanners-v1"
stamp="$venv/.wsdr-scanners-v1"
install_lock scanners
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "checkov==3.3.30" "parliament==1.6.4" >&2
  touch "$stamp"
fi
echo "$venv/bin"
