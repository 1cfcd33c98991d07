#!/usr/bin/env bash
# wait-for-dns-answer.sh ZONE_ID NAME TYPE EXPECTED [TIMEOUT_S] [EVERY_S]
# Wait until Route 53 itself answers NAME (TYPE) with EXPECTED (a space-separated list of
# values, any one will do), by asking Route 53's TestDNSAnswer: what its name servers answer
# now, health checks applied, with no resolver cache in between. Bounded: after TIMEOUT_S
# (default 300) it says what Route 53 still answers and exits 1.
set -euo pipefail
zone="$1" name="$2" type="$3" expected="$4" timeout="${5:-300}" every="${6:-10}"
deadline=$(( $(date +%s) + timeout ))
while :; do
  if answer="$(aws route53 test-dns-answer --hosted-zone-id "$zone" --record-name "$name" \
      --record-type "$type" --query RecordData --output text 2>&1)"; then :; else
    answer="(test-dns-answer failed: $answer)"
  fi
  for want in $expected; do
    for got in $answer; do
      if [ "${got%.}" = "${want%.}" ]; then
        echo "Route 53 answers $name ($type) with $got"
        exit 0
      fi
    done
  done
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "after ${timeout} s Route 53 still answers $name ($type) with: $answer (waiting for: $expected)" >&2
    exit 1
  fi
  sleep "$every"
done
