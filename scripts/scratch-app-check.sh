#!/usr/bin/env bash
# A new app written from crates/client/README.md alone, built outside the workspace: its
# [dependencies] are the README's toml block, its src/main.rs the README's rust block, and
# wsdr-client is its only wsdr dependency. The wsdr crates come from the packages that
# `cargo publish --dry-run` just verified (make package-check), patched in for crates.io,
# where they are not published yet: what a user of the published crate compiles.
# Prints the build's wall time (BENCHMARKS.md compares the cold one).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
packages="$root/target/package-check/package"
app="$root/target/scratch-app"
readme="$root/crates/client/README.md"
for crate in wsdr-protocol wsdr-net wsdr-client; do
  [ -f "$packages/$crate-0.1.0/Cargo.toml" ] || { echo "no package of $crate: run make package-check"; exit 1; }
done
rm -rf "$app/src"
mkdir -p "$app/src"
# The README's first toml block: the lines under [dependencies].
deps="$(awk '/^```toml/{f=1;next} /^```/{if(f)exit} f' "$readme" | grep -v '^\[dependencies\]')"
[ -n "$deps" ] || { echo "$readme has no toml block"; exit 1; }
wsdr_deps="$(grep -oE '^wsdr-[a-z-]+' <<<"$deps" | sort -u | tr '\n' ' ')"
[ "$wsdr_deps" = "wsdr-client " ] || { echo "the README asks for these wsdr crates: $wsdr_deps (only wsdr-client may be needed)"; exit 1; }
# The README's first rust block, with rustdoc's hidden lines shown.
awk '/^```rust/{f=1;next} /^```/{if(f)exit} f' "$readme" | sed -e 's/^# //' -e 's/^#$//' > "$app/src/main.rs"
cat > "$app/Cargo.toml" <<TOML
[package]
name = "scratch-app"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$deps

[patch.crates-io]
wsdr-client = { path = "$packages/wsdr-client-0.1.0" }
wsdr-net = { path = "$packages/wsdr-net-0.1.0" }
wsdr-protocol = { path = "$packages/wsdr-protocol-0.1.0" }

# Not a member of the repository's workspace.
[workspace]
TOML
start=$(date +%s.%N)
CARGO_TARGET_DIR="${SCRATCH_TARGET_DIR:-$root/target/scratch-app/target}" \
  cargo build --quiet --manifest-path "$app/Cargo.toml"
end=$(date +%s.%N)
tree="$(cd "$app" && cargo tree --quiet --prefix none -e normal | grep -oE '^wsdr-[a-z-]+' | sort -u | tr '\n' ' ')"
echo "scratch app from the README: built in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s; wsdr crates in its tree: $tree"
