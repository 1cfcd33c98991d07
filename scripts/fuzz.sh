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
  cargo fuzz run -O "$target" "corpus/$target" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 \
    | grep -E "^(#[0-9]+ +DONE|Done|==[0-9]+==|SUMMARY|thread .* panicked)|stat::" || true
  [ -z "$(ls -A "artifacts/$target" 2>/dev/null)" ] || { echo "crash found: fuzz/artifacts/$target"; exit 1; }
done
