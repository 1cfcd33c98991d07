#!/usr/bin/env bash
# The primary stack's outputs that the secondary's deploy needs, kept where the secondary can
# read them while the primary's Region is down.
#
#   primary-outputs.sh publish PRIMARY_REGION SECONDARY_REGION STACK_PREFIX
#     after a primary deploy: copy the outputs into Parameter Store in the secondary's Region
#     (/<prefix>/primary/<OutputKey>), so that a fix or a parameter change can still reach the
#     survivor during the outage it is for.
#   primary-outputs.sh read PRIMARY_REGION SECONDARY_REGION STACK_PREFIX KEY
#     one output: the primary stack's own (the truth while its Region answers), else the copy
#     in the secondary's Region, saying so on stderr. Prints nothing if neither has it.
set -euo pipefail
mode="$1"; primary="$2"; secondary="$3"; prefix="$4"
KEYS="ApiId RegionalDomainName RegionalHostedZoneId ConnectionsTableName StateTableName HealthUrlHost RegionVerdictAlarmName"
# A Region that is down does not answer: bounded, so that the fallback comes within seconds.
timeouts=(--cli-connect-timeout 5 --cli-read-timeout 10)

live() {
  aws cloudformation describe-stacks "${timeouts[@]}" --region "$primary" --stack-name "$prefix-primary" \
    --query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text
}

case "$mode" in
  publish)
    for key in $KEYS; do
      value=$(live "$key")
      [ -n "$value" ] && [ "$value" != None ] || continue
      aws ssm put-parameter --region "$secondary" --name "/$prefix/primary/$key" --type String \
        --overwrite --value "$value" >/dev/null
    done
    echo "the primary's outputs copied to Parameter Store in $secondary (/$prefix/primary/*)"
    ;;
  read)
    key="$5"
    if value=$(live "$key" 2>/dev/null) && [ -n "$value" ] && [ "$value" != None ]; then
      echo "$value"
      exit 0
    fi
    if value=$(aws ssm get-parameter "${timeouts[@]}" --region "$secondary" --name "/$prefix/primary/$key" \
      --query Parameter.Value --output text 2>/dev/null) && [ -n "$value" ] && [ "$value" != None ]; then
      echo "$prefix-primary in $primary did not answer for $key: using the copy in $secondary's Parameter Store" >&2
      echo "$value"
    fi
    ;;
  *)
    echo "usage: $0 publish|read PRIMARY_REGION SECONDARY_REGION STACK_PREFIX [KEY]" >&2
    exit 2
    ;;
esac
