#!/usr/bin/env bash
# Each Lambda links only the AWS service clients it calls (`cargo tree -e normal`): the
# authorizer none (its keys come from Secrets Manager through wsdr-secrets, one signed
# request without the SDK; scripts/check-crate-deps.sh forbids it the SDK), the canary
# CloudWatch and DynamoDB (its fast rounds, in the state table), the handler DynamoDB,
# @connections and SQS (the push jobs' queue), the evacuator DynamoDB and @connections, the
# health endpoint DynamoDB. (aws-sdk-sts comes with aws-config's
# credential chain.)
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
check() {
  local package="$1"; shift
  local allowed=" $* "
  local tree clients
  tree="$(cargo tree -p "$package" -e normal --prefix none)" || { echo "cargo tree -p $package failed"; exit 1; }
  clients="$(grep -oE '^aws-sdk-[a-z0-9]+' <<<"$tree" | sort -u || true)"
  for client in $clients; do
    case "$allowed" in
      *" $client "*) ;;
      *) echo "$package links $client, which it never calls"; status=1 ;;
    esac
  done
  echo "$package: ${clients//$'\n'/ }"
}
check authorizer
check canary aws-sdk-cloudwatch aws-sdk-dynamodb aws-sdk-sts
check ws-handler aws-sdk-dynamodb aws-sdk-apigatewaymanagement aws-sdk-sqs aws-sdk-sts
check evacuator aws-sdk-dynamodb aws-sdk-apigatewaymanagement aws-sdk-sts
check health aws-sdk-dynamodb aws-sdk-sts
exit $status
