#!/usr/bin/env bash
# Whether Route 53 calls a health check healthy now, by its own rule: "If more than 18% of
# health checkers report that an endpoint is healthy, Route 53 considers it healthy" (Route 53
# Developer Guide, "How Amazon Route 53 determines whether a health check is healthy"). One
# checker's failure is not the check's. Prints the count; exits 1 when the check is unhealthy.
#
# Usage: health-check-healthy.sh HEALTH_CHECK_ID
set -euo pipefail
statuses=$(aws route53 get-health-check-status --health-check-id "$1" \
  --query "HealthCheckObservations[].StatusReport.Status" --output text | tr '\t' '\n' | grep . || true)
total=$(grep -c . <<<"$statuses" || true)
ok=$(grep -c '^Success' <<<"$statuses" || true)
echo "$ok of $total checkers report healthy"
[ "$total" -gt 0 ] && [ $((ok * 100)) -gt $((total * 18)) ]
