#!/usr/bin/env bash
# Install what the browser tests need, idempotently: Debian's chromium and the node packages
# pinned in tests/browser/package-lock.json. Prints nothing but errors.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
. "$root/scripts/install-lock.sh"
install_lock browser-tools
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# playwright-core drives the browser; esbuild, react and react-dom build the React hook's
# test page; typescript checks the npm package's declarations (scripts/npm-package-check.sh).
missing=0
for module in playwright-core esbuild react react-dom typescript; do
  [ -d "tests/browser/node_modules/$module" ] || missing=1
done
if [ "$missing" -eq 1 ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
