#!/usr/bin/env bash
# The browser client as an npm package (web/package.json): pack it, check the tarball holds
# exactly the module, the React entry, their declarations and the README, install it into a
# scratch project, import both entries with node (each exporting exactly what its
# declarations declare), and type-check two consumers with tsc --strict: a DOM app
# (tests/npm/consumer.ts) and a Node-only service on the `ws` package with no DOM lib
# (tests/npm/consumer-node.ts). Then install the plain client into React 17, 18 and 19
# projects: no peer error, and the client imports. typescript and react come from
# tests/browser's pinned packages (scripts/browser-tools.sh), ws and Node's types from
# tests/npm's.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
scripts/browser-tools.sh
for module in ws @types/ws @types/node; do
  [ -d "tests/npm/node_modules/$module" ] || { (cd tests/npm && npm ci --no-audit --no-fund --silent); break; }
done
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
npm install --offline --no-audit --no-fund --silent "$out/$tarball" "$root/tests/browser/node_modules/react"
cp "$root/tests/npm/import.mjs" "$root/tests/npm/consumer.ts" "$root/tests/npm/tsconfig.json" .
node import.mjs
tsc="$root/tests/browser/node_modules/.bin/tsc"
"$tsc" -p tsconfig.json
# The Node-only service: its own project, so that no DOM type reaches it.
mkdir -p "$out/node-only"
cd "$out/node-only"
printf '{ "name": "node-only", "private": true, "type": "module" }\n' > package.json
npm install --offline --no-audit --no-fund --silent "$out/$tarball" \
  "$root/tests/npm/node_modules/ws" "$root/tests/npm/node_modules/@types/ws" "$root/tests/npm/node_modules/@types/node"
cp "$root/tests/npm/consumer-node.ts" "$root/tests/npm/tsconfig.node.json" .
"$tsc" -p tsconfig.node.json
# React apps of three majors: the plain client installs beside each with no peer conflict
# (react is an optional peer from 16.8), and imports.
for react in 17.0.2 18.3.1 19.3.1; do
  mkdir -p "$out/react-$react"
  cd "$out/react-$react"
  printf '{ "name": "react-%s-app", "private": true, "type": "module", "dependencies": { "react": "%s" } }\n' "$react" "$react" > package.json
  if ! log="$(npm install --no-audit --no-fund --loglevel=warn "$out/$tarball" 2>&1)" || grep -qiE 'ERESOLVE|peer dep|conflicting peer' <<<"$log"; then
    echo "wsdr-client does not install cleanly beside react@$react:"; echo "$log"; exit 1
  fi
  [ "$(node -p 'require("react/package.json").version')" = "$react" ] || { echo "react@$react not installed"; exit 1; }
  node --input-type=module -e "import { AuctionClient } from 'wsdr-client'; if (typeof AuctionClient !== 'function') process.exit(1);"
done
cd "$root"
# The release's own command, dry (no login needed; provenance only exists in the workflow).
published="$(cd web && npm publish --dry-run --provenance=false 2>&1)"
grep -q '^+ wsdr-client@' <<<"$published" || { echo "npm publish --dry-run failed:"; echo "$published"; exit 1; }
echo "npm package $tarball: packed, installed, imported, type-checked (tsc --strict: DOM app, Node-only service on ws), installed beside react 17, 18 and 19, publish dry run"
