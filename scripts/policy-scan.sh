#!/usr/bin/env bash
# The offline policy checks a security review runs, on every template wsdr deploys
# (template.yaml, ci/bootstrap.yaml, arc/region-switch.yaml):
# - checkov (IaC scanner): every check passes, or is skipped in place (the resource's
#   Metadata.checkov.skip) with a comment that gives the reason;
# - parliament (IAM linter) over every policy the templates create, the SAM transform's
#   roles included: every finding fixed, or suppressed in place (a `# parliament-ignore`
#   comment above the statement) with its reason; a suppression no finding needs fails too.
# Offline: checkov is told not to download anything.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools="$(scripts/python-tools.sh)"
scanners="$(scripts/scanners.sh)"
out="$root/target/policy-scan"
mkdir -p "$out"
templates=(template.yaml ci/bootstrap.yaml arc/region-switch.yaml)
args=()
for t in "${templates[@]}"; do args+=(-f "$t"); done
set +e
BC_SKIP_MAPPING=TRUE CHECKOV_NO_OUTPUT_LIMIT=1 "$scanners/checkov" "${args[@]}" --framework cloudformation \
  --skip-download -o json > "$out/checkov.json" 2> "$out/checkov.err"
rc=$?
set -e
"$scanners/python" - "$out/checkov.json" "$rc" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
reports = data if isinstance(data, list) else [data]
failed, skipped, passed, bad_skips = [], 0, 0, []
for report in reports:
    results = report.get("results", {})
    for check in results.get("failed_checks", []):
        failed.append(f"{check['file_path']}: {check['resource']}: {check['check_id']} {check['check_name']}")
    for check in results.get("skipped_checks", []):
        skipped += 1
        comment = (check.get("check_result") or {}).get("suppress_comment", "") or ""
        if len(comment.strip()) < 20 or "No comment provided" in comment:
            bad_skips.append(f"{check['file_path']}: {check['resource']}: {check['check_id']} skipped without a reason")
    passed += len(results.get("passed_checks", []))
for line in failed + bad_skips:
    print(f"checkov: {line}")
print(f"checkov: {passed} passed, {skipped} skipped in place with a reason, {len(failed)} failed, {len(bad_skips)} skips without a reason")
if failed or bad_skips or (int(sys.argv[2]) != 0 and not failed):
    if int(sys.argv[2]) != 0 and not failed:
        print(f"checkov exited {sys.argv[2]}: see target/policy-scan/checkov.err")
    sys.exit(1)
PY
"$tools/python" tests/policies/export_policies.py "$out/policies.json" > /dev/null
"$scanners/python" tests/policies/parliament_check.py "$out/policies.json"
