#!/usr/bin/env bash
# Stryker over the browser client (web/wsdr-client.js and the React hook, web/react.js) with
# node's own test runner (`node --test test/`, as `make js-test`), in web/ of a git worktree
# of HEAD with the checkout's uncommitted changes (target/mutants-runs/tree): Stryker mutates
# in place there, never in the checkout. Stryker is pinned in tests/stryker (npm ci on first
# use). Results: target/mutants-runs/web/mutation.json and the clear-text table.
# MUTANTS_TREE=<dir>: another worktree (beside a cargo-mutants run in the default one).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/tests/stryker"
. "$root/scripts/install-lock.sh"
install_lock stryker
[ -x "$tools/node_modules/.bin/stryker" ] || (cd "$tools" && npm ci --no-audit --no-fund --silent)
install_unlock
work="$root/target/mutants-runs"
tree="${MUTANTS_TREE:-$work/tree}"
mkdir -p "$work/web"
. "$root/scripts/mutants-tree.sh"
mutants_tree "$root" "$tree" with-uncommitted
cd "$tree/web"
# IN_DIFF=<commit>: only the lines of the two files changed since that commit (with the
# checkout's uncommitted changes), as `make mutants-diff` does for the Rust crates.
if [ -n "${IN_DIFF:-}" ]; then
  ranges="$(git -C "$root" diff -U0 "$IN_DIFF" -- web/wsdr-client.js web/react.js | awk '
    /^\+\+\+ b\/web\// { file = substr($2, 7) }
    /^@@/ { split($3, r, ","); start = substr(r[1], 2); n = (r[2] == "" ? 1 : r[2]);
            if (n > 0) printf "%s:%d-%d,", file, start, start + n - 1 }')"
  if [ -z "$ranges" ]; then
    echo "mutants-web in-diff: no line of web/wsdr-client.js or web/react.js changed since $IN_DIFF"
    exit 0
  fi
  echo "mutants-web in-diff since $IN_DIFF: ${ranges%,}"
  set -- --mutate "${ranges%,}" "$@"
fi
exec "$tools/node_modules/.bin/stryker" run "$tools/stryker.config.json" "$@"
