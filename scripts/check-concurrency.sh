#!/usr/bin/env bash
# check-concurrency.sh REGION STACK RESERVE
# Before a deploy: can this account, in REGION, give STACK's functions RESERVE reserved
# concurrency and still keep the 100 unreserved executions Lambda insists on? Lambda refuses
# any reservation that would leave less ("You can reserve up to the Unreserved account
# concurrency value that is shown, minus 100"), and a new account's limit can be as low as 10,
# which also leaves the handler, the authorizer and the canaries a pool a reconnect storm
# exhausts. What STACK's functions already reserve is counted as available (a redeploy).
# RESERVE 0 checks only that limit. ALLOW_LOW_CONCURRENCY=1 turns the failure into a warning.
set -euo pipefail
region="$1" stack="$2" reserve="$3"
minimum_unreserved=100

settings="$(aws lambda get-account-settings --region "$region" \
  --query '[AccountLimit.ConcurrentExecutions, AccountLimit.UnreservedConcurrentExecutions]' --output text)"
read -r limit unreserved <<<"$settings"
case "$limit$unreserved" in *[!0-9]*|"") echo "cannot read the Lambda account settings in $region: $settings" >&2; exit 1;; esac

already=0
if functions="$(aws cloudformation list-stack-resources --region "$region" --stack-name "$stack" \
    --query "StackResourceSummaries[?ResourceType=='AWS::Lambda::Function'].PhysicalResourceId" \
    --output text 2>/dev/null)"; then
  for fn in $functions; do
    reserved="$(aws lambda get-function-concurrency --region "$region" --function-name "$fn" \
      --query ReservedConcurrentExecutions --output text 2>/dev/null || true)"
    case "$reserved" in ''|None|*[!0-9]*) ;; *) already=$((already + reserved));; esac
  done
fi

left=$((unreserved + already - reserve))
fail() {
  if [ "${ALLOW_LOW_CONCURRENCY:-}" = 1 ]; then echo "warning: $*" >&2; exit 0; fi
  echo "$*" >&2
  exit 1
}
if [ "$limit" -lt "$minimum_unreserved" ]; then
  fail "$region: this account's Lambda concurrency is $limit. wsdr's functions share it with a reconnect storm, and nothing can be reserved below $minimum_unreserved: request 'Concurrent executions' of at least 1000 in Service Quotas (Lambda, quota L-B99A9384) in $region, or deploy with DECISION_PATH_RESERVED_CONCURRENCY=0 ALLOW_LOW_CONCURRENCY=1 (docs/DEPLOY.md, 'Concurrency')."
fi
if [ "$left" -lt "$minimum_unreserved" ]; then
  fail "$region: reserving $reserve for $stack's decision path would leave $left unreserved executions; Lambda requires $minimum_unreserved (limit $limit, unreserved now $unreserved, $stack already reserves $already). Raise 'Concurrent executions' (quota L-B99A9384) or lower DECISION_PATH_RESERVED_CONCURRENCY (docs/DEPLOY.md, 'Concurrency')."
fi
echo "$region: Lambda concurrency $limit, $unreserved unreserved; $stack reserves $reserve, leaving $left (at least $minimum_unreserved): ok"
