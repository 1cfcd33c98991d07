#!/usr/bin/env bash
# Run every fuzz target for a bounded time (default 60 s each). cargo-fuzz is installed if
# missing. The one toolchain here is stable: RUSTC_BOOTSTRAP lets cargo fuzz pass its
# sanitizer flags to it. A crash leaves its input in fuzz/artifacts/<target>/ and fails the run:
# turn it into a regression test (docs/RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
cd fuzz
for target in $(cargo fuzz list); do
  mkdir -p "corpus/$target"
  echo "== $target (${secs} s)"
  mkdir -p logs
  status=0
  cargo fuzz run -O "$target" "corpus/$target" -- -max_total_time="$secs" -rss_limit_mb=2048 \
    >"logs/$target.log" 2>&1 || status=$?
  grep -E "^Done [0-9]+ runs|^#[0-9]+ +DONE" "logs/$target.log" | tail -n1 || true
  echo "   corpus: $(ls "corpus/$target" | wc -l) inputs; full log: fuzz/logs/$target.log"
  if [ "$status" -ne 0 ] || [ -n "$(ls -A "artifacts/$target" 2>/dev/null)" ]; then
    tail -n 30 "logs/$target.log"
    echo "crash found (exit $status): fuzz/artifacts/$target"
    exit 1
  fi
done
