#!/usr/bin/env bash
# Mutation runs of the chaos checker: each patch in scripts/mutants/ breaks one guarantee on
# purpose; the campaign must report violations for it (exit non-zero). Runs are simulated, so
# the result does not depend on --parallel. Builds each mutant in one throwaway git worktree
# (target/mutants/tree, reset to HEAD before each patch, so that only the files the last
# and the next patch touch get new times and cargo rebuilds just their crates), never
# touching the checkout. A patch whose first line is `# caught-by-test: <cargo test arguments>` is judged
# by that test instead (it must fail); one whose first line is `# caught-by-command: <shell
# command>` by that command, run in the mutant's tree (it must fail: the browser client's
# mutants name `cd web && node --test test/`). Usage: scripts/mutation-run.sh [runs per mutant,
# default 30] [patch ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-30}"; shift || true
patches=("$@")
[ ${#patches[@]} -gt 0 ] || patches=("$root"/scripts/mutants/*.patch)
work="$root/target/mutants"
mkdir -p "$work"
export CARGO_TARGET_DIR="$work/target"
. "$root/scripts/mutants-tree.sh"
status=0
for patch in "${patches[@]}"; do
  patch="$(realpath "$patch")"
  name="$(basename "$patch" .patch)"
  tree="$work/tree"
  mutants_tree "$root" "$tree"
  git -C "$tree" apply "$patch"
  log="$work/$name.log"
  # A mutant whose first line says `# caught-by-test: <cargo test arguments>` breaks a promise
  # that a named test keeps (not the campaign): that test must fail on it.
  test_args="$(sed -n '1s/^# caught-by-test: //p' "$patch")"
  command="$(sed -n '1s/^# caught-by-command: //p' "$patch")"
  if [ -n "$command" ]; then
    set +e
    # Bounded: a mutant that hangs its test is caught by the timeout (exit 124).
    (cd "$tree" && timeout 900 bash -c "$command") >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
      echo "CAUGHT  $name: $command failed"
    else
      echo "MISSED  $name: $command passed"
      status=1
    fi
    continue
  fi
  if [ -n "$test_args" ]; then
    set +e
    # shellcheck disable=SC2086 # the arguments are words
    (cd "$tree" && cargo test -q $test_args) >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
      echo "CAUGHT  $name: cargo test $test_args failed"
    else
      echo "MISSED  $name: cargo test $test_args passed"
      status=1
    fi
    continue
  fi
  (cd "$tree" && cargo build -q -p wsdr-lab --bin wsdr)
  set +e
  # A strong-* mutant breaks strong mode: its campaign runs on the MRSC table.
  mode=eventual; [[ "$name" == strong-* ]] && mode=strong
  "$CARGO_TARGET_DIR/debug/wsdr" chaos --seed 1 --runs "$runs" --parallel 2 --consistency "$mode" --report "$work/$name.json" >"$log" 2>&1
  rc=$?
  set -e
  summary="$(grep '^chaos:' "$log" || tail -n1 "$log")"
  kinds="$(python3 -c 'import json,sys,collections
r=json.load(open(sys.argv[1]))
c=collections.Counter(v["kind"] for run in r.get("failed_runs",[]) for v in run.get("violations",[]))
print(", ".join(f"{k} {n}" for k,n in c.most_common()) or "none")' "$work/$name.json" 2>/dev/null || echo "?")"
  if [ "$rc" -ne 0 ]; then
    echo "CAUGHT  $name: $summary"
  else
    echo "MISSED  $name: $summary"
    status=1
  fi
  echo "        violations by kind: $kinds"
done
git -C "$work/tree" reset --quiet --hard
exit $status
