#!/usr/bin/env bash
# What each crate may link (docs/ARCHITECTURE.md, "What each crate may import"), checked on
# `cargo tree -e normal,features` (what a release build links, tests excluded):
# - the domain (wsdr-protocol, wsdr-core) links no AWS crate;
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
forbid wsdr-core '^wsdr-chat ' "the kit depends on no app"
forbid wsdr-chat "^$aws" "an app knows nothing of AWS"
# The authorizer, which every reconnecting user meets in a failover storm, starts without
# the SDK: its keys come through wsdr-secrets (one request signed by AWS's own signer,
# aws-sigv4, and the types it signs with), which links no SDK client, configuration loader or
# runtime either: those were the cold start's cost.
sdk='aws-(sdk-[a-z0-9]+|config|runtime|types|smithy-runtime|smithy-json|smithy-query|smithy-xml|lambda-events) '
for lean in authorizer wsdr-secrets; do
  forbid "$lean" "^$sdk" "its cold start carries no AWS SDK client"
done
for lambda in ws-handler authorizer canary evacuator health; do
  forbid "$lambda" '^wsdr-core feature "memory"' "the in-memory adapters are for tests and the lab"
  forbid "$lambda" '^wsdr-lab ' "the lab is not deployed"
done
# Inside wsdr-core, the DR machinery (the push path, verdicts, evacuation, fail-over orders,
# fan-out) never names the auction's service: the service builds on the machinery, not the
# other way round (the push path asks a PushSource).
machinery='crates/core/src/push crates/core/src/verdict.rs crates/core/src/evacuate.rs crates/core/src/failover_order.rs crates/core/src/fanout.rs'
# shellcheck disable=SC2086
if found="$(grep -rnE 'crate::service|AuctionService' $machinery)"; then
  echo "wsdr-core's machinery names the auction's service:"
  sed 's/^/  /' <<<"$found"
  status=1
fi
# The kit's items, write and read paths and its service for any app's topics are every app's:
# they never name the auction (the auction is one app on them, in auction_store.rs).
kit='crates/core/src/items.rs crates/core/src/write.rs crates/core/src/read.rs crates/core/src/topics.rs crates/core/src/laws.rs'
# shellcheck disable=SC2086
if found="$(grep -nE 'auction_store|crate::service|Auction[A-Za-z]*|Bid(Id|Record|Reason|Commit)|Amount' $kit)"; then
  echo "the kit's items, write and read paths or topic service name the auction:"
  sed 's/^/  /' <<<"$found"
  status=1
fi
[ "$status" -eq 0 ] && echo "crate rules: the domain links no AWS crate, the client neither domain nor AWS, the authorizer no SDK, no Lambda the fakes or the lab, the machinery never the service, the kit's items, write and read paths and topic service never the auction, the kit no app crate, an app crate no AWS crate"
scripts/check-lambda-deps.sh || status=1
exit $status
