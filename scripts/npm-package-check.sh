#!/usr/bin/env bash
# The browser client as an npm package (web/package.json): pack it, check the tarball holds
# exactly the module, the React entry, their declarations and the README, install it into a
# scratch project, import both entries with node (each exporting exactly what its
# declarations declare), and type-check a consumer (tests/npm/consumer.ts) with tsc --strict.
# typescript and react come from tests/browser's pinned packages (scripts/browser-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/browser-tools.sh
out="$PWD/target/npm"
rm -rf "$out"
mkdir -p "$out/scratch"
tarball="$(cd web && npm pack --silent --pack-destination "$out" | tail -1)"
contents="$(tar -tzf "$out/$tarball" | sort | tr '\n' ' ')"
expected="package/LICENSE-APACHE package/LICENSE-MIT package/README.md package/package.json package/react.d.ts package/react.js package/wsdr-client.d.ts package/wsdr-client.js "
if [ "$contents" != "$expected" ]; then
  echo "npm package holds: $contents"
  echo "expected:          $expected"
  exit 1
fi
cd "$out/scratch"
printf '{ "name": "scratch", "private": true, "type": "module" }\n' > package.json
# No registry needed: the package has no dependencies, and react (its optional peer, for the
# hook's import) is the one tests/browser pinned.
npm install --offline --no-audit --no-fund --silent "$out/$tarball" "$OLDPWD/tests/browser/node_modules/react"
cp "$OLDPWD/tests/npm/import.mjs" "$OLDPWD/tests/npm/consumer.ts" "$OLDPWD/tests/npm/tsconfig.json" .
node import.mjs
"$OLDPWD/tests/browser/node_modules/.bin/tsc" -p tsconfig.json
# The release's own command, dry (no login needed; provenance only exists in the workflow).
published="$(cd "$OLDPWD/web" && npm publish --dry-run --provenance=false 2>&1)"
grep -q '^+ wsdr-client@' <<<"$published" || { echo "npm publish --dry-run failed:"; echo "$published"; exit 1; }
echo "npm package $tarball: packed, installed, imported, type-checked (tsc --strict), publish dry run"
