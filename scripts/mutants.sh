#!/usr/bin/env bash
# Mechanical mutation testing of the product crates with cargo-mutants (every mutant of its
# kinds, none picked by hand; each crate against its own tests, the kit (wsdr-core) against
# its own and its two apps', wsdr-lambda against its own and two Lambdas'; the hand-written cross-component mutants are
# scripts/mutation-run.sh's). Runs in a git worktree of HEAD (target/mutants-runs/tree, its own
# target directory kept between runs, so a mutant rebuilds only its crate), with DynamoDB
# Local and the local SQS peer around it as `make test` has them; never touches the checkout.
#
#   scripts/mutants.sh [crate ...]            every mutant of each crate (default: all of them)
#   scripts/mutants.sh --in-diff [BASE]       only mutants on lines changed since BASE
#                                             (default: origin/main, else HEAD~1), and the
#                                             checkout's uncommitted changes: a contributor's
#                                             run on their change
#   SHARD=k/n scripts/mutants.sh crate        one shard of a crate (cargo-mutants --shard)
#   MUTANTS_TREE=<dir>                        another worktree (two runs at once)
#   MUTANTS_ARGS="--file <path> ..."          more cargo-mutants arguments (some files only)
#
# Results: target/mutants-runs/<name>/mutants.out (outcomes.json, caught.txt, missed.txt,
# unviable.txt, timeout.txt) and a summary line per run. Exit 1 when a mutant is missed or
# timed out. Mutants judged equivalent are listed, each with its reason, in
# .cargo/mutants.toml (exclude_re), never by file or function.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
product=(wsdr-protocol wsdr-core wsdr-auction wsdr-chat wsdr-aws wsdr-secrets wsdr-lambda authorizer canary health evacuator ws-handler wsdr-client)
work="$root/target/mutants-runs"
tree="${MUTANTS_TREE:-$work/tree}"
mkdir -p "$work"
bin="$("$root/scripts/cargo-mutants.sh")"
export PATH="$bin:$PATH"
# The worktree's build is its own (no clippy wrapper: a lint is not a test).
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
export CARGO_TARGET_DIR="${MUTANTS_TREE:+$MUTANTS_TREE-target}" CARGO_PROFILE_DEV_DEBUG=false
[ -n "$CARGO_TARGET_DIR" ] || CARGO_TARGET_DIR="$work/target"

in_diff=""
if [ "${1:-}" = "--in-diff" ]; then
  base="${2:-}"
  if [ -z "$base" ]; then
    base="$(git -C "$root" rev-parse --verify --quiet origin/main || git -C "$root" rev-parse HEAD~1)"
  fi
  # One patch and one result directory per worktree: two runs at once never share them.
  in_diff="$work/in-diff${MUTANTS_TREE:+-$(basename "$MUTANTS_TREE")}.patch"
  # Committed since BASE and not yet committed, product sources only.
  git -C "$root" diff "$base" -- 'crates/*/src/*' 'crates/apps/*/src/*' >"$in_diff"
  set -- "${product[@]}"
  if [ ! -s "$in_diff" ]; then
    echo "mutants: no product source changed since $base"
    exit 0
  fi
fi
crates=("$@")
[ ${#crates[@]} -gt 0 ] || crates=("${product[@]}")

# A worktree of HEAD, with the checkout's uncommitted changes on top (so that --in-diff's
# lines exist in it).
. "$root/scripts/mutants-tree.sh"
mutants_tree "$root" "$tree" with-uncommitted

status=0
run() {
  local name="$1"; shift
  local out="$work/$name"
  rm -rf "$out"; mkdir -p "$out"
  set +e
  # shellcheck disable=SC2086 # MUTANTS_ARGS is a list of arguments
  (cd "$tree" && "$root/scripts/with-dynamodb-local.sh" cargo mutants --in-place --no-shuffle \
    --output "$out" "$@" ${MUTANTS_ARGS:-})
  local rc=$?
  set -e
  # cargo-mutants: 0 all caught, 2 missed, 3 timeouts, 4 the baseline failed.
  [ "$rc" -eq 0 ] || status=1
  python3 - "$out/mutants.out/outcomes.json" "$name" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
try:
    data = json.load(open(path))
except OSError:
    print(f"mutants {name}: no outcomes (the baseline failed?)"); sys.exit(0)
count = {}
for o in data.get("outcomes", []):
    if o.get("scenario") == "Baseline":
        continue
    s = o.get("summary", "?")
    count[s] = count.get(s, 0) + 1
caught = count.get("CaughtMutant", 0); missed = count.get("MissedMutant", 0)
unviable = count.get("Unviable", 0); timeout = count.get("Timeout", 0)
viable = caught + missed + timeout
score = f"{100.0 * caught / viable:.1f}%" if viable else "-"
print(f"mutants {name}: {caught + missed + unviable + timeout} generated, {caught} caught, "
      f"{missed} missed, {unviable} unviable, {timeout} timed out; score {score}")
PY
}

if [ -n "$in_diff" ]; then
  args=()
  for c in "${crates[@]}"; do args+=(--package "$c"); done
  run "in-diff${MUTANTS_TREE:+-$(basename "$MUTANTS_TREE")}" --in-diff "$in_diff" "${args[@]}"
else
  for c in "${crates[@]}"; do
    shard=()
    [ -z "${SHARD:-}" ] || shard=(--shard "$SHARD")
    # The kit is judged by its own tests and by its two apps', which drive its service and
    # push path end to end as a deployment does.
    judges=()
    [ "$c" != wsdr-core ] || judges=(--test-package wsdr-core --test-package wsdr-auction --test-package wsdr-chat)
    # What every Lambda's `main` runs first (`start`: TLS roots, logging) is judged by its own
    # tests and by two functions' binaries under the local Runtime API (one logging JSON, one
    # plain text): nothing else runs a `main`.
    [ "$c" != wsdr-lambda ] || judges=(--test-package wsdr-lambda --test-package authorizer --test-package health)
    # The client's options for the lab's simulations (the in-memory network) and for the
    # operating system's root certificates are code too: built and tested with them. Its code
    # for a build without TLS (`wss://` refused as a configuration error) compiles only
    # without the default features, so it is judged in a run of its own, over the one file
    # that holds it, and left to that run by the first.
    features=()
    if [ "$c" = wsdr-client ]; then
      features=(--features simulation,native-roots --exclude crates/client/src/transport/without_tls.rs)
    fi
    run "$c${SHARD:+-${SHARD//\//-of-}}" --package "$c" "${shard[@]}" "${judges[@]}" "${features[@]}"
    if [ "$c" = wsdr-client ] && [ -z "${SHARD:-}" ]; then
      run "$c-without-tls" --package "$c" --no-default-features --features simulation \
        --file crates/client/src/transport/without_tls.rs
    fi
  done
fi
exit "$status"
