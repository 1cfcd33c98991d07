#!/usr/bin/env bash
# The deployable build path, on this machine: `cargo lambda build --release` for the host
# (x86_64; arm64 needs a Rust target this machine cannot install: the release workflow builds
# it), the five functions (or those LAMBDA_HOST_FUNCTIONS names), into cargo-lambda's own
# layout, <dir>/<function>/bootstrap, which `sam build` (BuildMethod: rust-cargolambda) and
# `sam package` take. The release profile's optimizations (fat LTO, one codegen unit, opt-level s) are switched off here through cargo's
# environment: what is checked is cargo-lambda's build and layout, in about two minutes
# instead of ten; the optimized build is `make package`'s. Each bootstrap must be an
# executable ELF for this machine that, started outside Lambda, fails at once saying it has no
# runtime API (a function that would hang or crash at start fails here).
set -euo pipefail
cd "$(dirname "$0")/.."
lambda="$(scripts/cargo-lambda.sh)"
out="$PWD/target/lambda-host"
all=(ws-handler authorizer canary evacuator health)
# LAMBDA_HOST_FUNCTIONS (space-separated) builds some of them (the release workflow: all five).
read -r -a functions <<<"${LAMBDA_HOST_FUNCTIONS:-${all[*]}}"
for fn in "${functions[@]}"; do
  [[ " ${all[*]} " == *" $fn "* ]] || { echo "unknown function $fn (one of: ${all[*]})"; exit 2; }
done
# Its own target directory (cargo-lambda builds with --target and its own rustflags, so
# nothing of the test build is reused, and nothing of it is invalidated); no clippy wrapper.
env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS PATH="$lambda:$PATH" CARGO_TARGET_DIR="$out/target" \
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_INCREMENTAL=false \
  cargo lambda build --release --compiler cargo --lambda-dir "$out/lambda" \
  $(printf -- '--bin %s ' "${functions[@]}")
status=0
for fn in "${functions[@]}"; do
  boot="$out/lambda/$fn/bootstrap"
  if [ ! -x "$boot" ]; then
    echo "FAIL $fn: no executable $boot"; status=1; continue
  fi
  if ! head -c 20 "$boot" | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46'; then
    echo "FAIL $fn: $boot is not an ELF binary"; status=1; continue
  fi
  # Outside Lambda (no AWS_LAMBDA_RUNTIME_API) a function must stop at once, saying why.
  set +e
  # A Region and no instance metadata: nothing is asked of the network.
  said="$(env -i PATH=/usr/bin:/bin AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true NO_COLOR=1 \
    timeout 10 "$boot" 2>&1)"; rc=$?
  set -e
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
    echo "FAIL $fn: started outside Lambda it $([ "$rc" -eq 124 ] && echo hung || echo exited 0)"; status=1; continue
  fi
  echo "ok   $fn: $(stat -c %s "$boot") bytes; outside Lambda: $(tr '\n' ' ' <<<"$said" | cut -c1-100)"
done
exit "$status"
