#!/usr/bin/env bash
# Install what the browser tests need, idempotently: Debian's chromium and playwright-core
# (pinned in tests/browser/package-lock.json). Prints nothing but errors.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
