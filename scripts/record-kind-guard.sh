#!/usr/bin/env bash
# Switching the failover records between CNAME (AliasRecords=false) and alias A records
# (AliasRecords=true) on an existing secondary stack cannot be done in one update:
# CloudFormation creates the new records before it deletes the old ones, and Route 53 refuses
# a CNAME beside any other record of the same name, so the update fails and rolls back.
# The way through is two deploys: AliasRecords=none (the records go), then the new kind.
#
# Usage: record-kind-guard.sh REGION STACK PARAMETER_OVERRIDE...
# Prints `two-step` when this deploy switches kinds and RECORD_SWITCH=two-step allows the
# two deploys (the caller deploys AliasRecords=none first); prints nothing when no switch is
# needed (no stack yet, same kind, or to or from none); exits 1 with what to do otherwise.
set -euo pipefail
region="$1"; stack="$2"; shift 2
wanted=false
for override in "$@"; do
  case "$override" in AliasRecords=*) wanted="${override#AliasRecords=}";; esac
done
live=$(aws cloudformation describe-stacks --region "$region" --stack-name "$stack" \
  --query "Stacks[0].Parameters[?ParameterKey=='AliasRecords'].ParameterValue" --output text 2>/dev/null) || exit 0
case "$live" in ""|None) live=false;; esac
if [ "$live" = "$wanted" ] || [ "$live" = none ] || [ "$wanted" = none ]; then
  exit 0
fi
if [ "${RECORD_SWITCH:-}" = two-step ]; then
  echo two-step
  exit 0
fi
cat >&2 <<MSG
$stack has AliasRecords=$live and this deploy asks for AliasRecords=$wanted. One update cannot
switch them: CloudFormation creates the new records before deleting the old, Route 53 refuses
a CNAME beside an A record of the same name, and the update rolls back. Switch in two deploys,
knowing that the global name answers nothing between them (about as long as one deploy;
clients that know each Region's own endpoint keep working):
  make deploy-secondary ... RECORD_SWITCH=two-step
(or by hand: EXTRA_PARAMS=AliasRecords=none first, then AliasRecords=$wanted).
MSG
exit 1
