#!/usr/bin/env bash
# What each crate may link (docs/ARCHITECTURE.md, "What each crate may import"), checked on
# `cargo tree -e normal,features` (what a release build links, tests excluded):
# - the domain (wsdr-protocol, wsdr-core, the apps) links no AWS crate;
# - the kit (wsdr-core) and its adapters (wsdr-aws) link no app, and no file of the kit names
#   an app's types;
# - the client (wsdr-client) links neither the domain nor any AWS crate;
# - the authorizer and wsdr-secrets link no AWS SDK client, loader or runtime (aws-sigv4 only);
# - no Lambda links the in-memory adapters (wsdr-core's `memory` feature) or the lab;
# - each Lambda links only the AWS service clients it calls (scripts/check-lambda-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
tree() {
  cargo tree -p "$1" -e normal,features --prefix none 2>/dev/null || {
    echo "cargo tree -p $1 failed" >&2
    exit 1
  }
}
forbid() {
  local package="$1" pattern="$2" why="$3" found
  found="$(tree "$package" | grep -E "$pattern" | sort -u || true)"
  if [ -n "$found" ]; then
    echo "$package links what it must not ($why):"
    sed 's/^/  /' <<<"$found"
    status=1
  fi
}
# The AWS SDK and its runtime (aws-lc-rs, a TLS crypto provider, is not AWS's API).
aws='aws-(sdk-[a-z0-9]+|config|smithy-[a-z0-9-]+|types|credential-types|sigv4|runtime|lambda-events) '
for domain in wsdr-protocol wsdr-core; do
  forbid "$domain" "^$aws" "the domain knows nothing of AWS"
done
forbid wsdr-client "^($aws|wsdr-core )" "the client speaks the protocol only"
# Apps ride the kit; the kit never depends on an app, and an app knows nothing of AWS (the
# kit's adapters store its values).
for app in wsdr-auction wsdr-chat; do
  forbid wsdr-core "^$app " "the kit depends on no app"
  forbid wsdr-aws "^$app " "the kit's adapters store any app's values, knowing none"
  forbid "$app" "^$aws" "an app knows nothing of AWS"
done
forbid wsdr-chat '^wsdr-auction ' "an app depends on no other app"
forbid wsdr-auction '^wsdr-chat ' "an app depends on no other app"
# The authorizer, which every reconnecting user meets in a failover storm, starts without
# the SDK: its keys come through wsdr-secrets (one request signed by AWS's own signer,
# aws-sigv4, and the types it signs with), which links no SDK client, configuration loader or
# runtime either: those were the cold start's cost.
sdk='aws-(sdk-[a-z0-9]+|config|runtime|types|smithy-runtime|smithy-json|smithy-query|smithy-xml|lambda-events) '
for lean in authorizer wsdr-secrets; do
  forbid "$lean" "^$sdk" "its cold start carries no AWS SDK client"
done
for lambda in ws-handler authorizer canary evacuator health; do
  forbid "$lambda" '^wsdr-(core|auction) feature "memory"' "the in-memory adapters are for tests and the lab"
  forbid "$lambda" '^wsdr-lab ' "the lab is not deployed"
done
# No file of the kit names an app's types: the auction's values, service and frames live in
# crates/apps/auction, the chat room's in crates/apps/chat (the kit routes frames by a
# topic's namespace and an app's own frames through `AppFrames`).
if found="$(grep -rnE 'wsdr_(auction|chat)|Auction[A-Za-z]*|Bid(Id|Record|Reason|Commit)|Amount|Chat[A-Z]?[a-z]*\b' crates/core/src)"; then
  echo "the kit (wsdr-core) names an app:"
  sed 's/^/  /' <<<"$found"
  status=1
fi
[ "$status" -eq 0 ] && echo "crate rules: the domain links no AWS crate, the client neither domain nor AWS, the authorizer no SDK, no Lambda the fakes or the lab, the kit no app crate and no file of it an app's types, the kit's adapters no app, an app no AWS crate and no other app"
scripts/check-lambda-deps.sh || status=1
exit $status
