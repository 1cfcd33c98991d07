#!/usr/bin/env bash
# Run a command with a local SQS peer (moto's server, from the pinned Python tools) listening
# on a free loopback port, exported to the command as SQS_ENDPOINT; stop it afterwards,
# whatever happens. The push path's queue adapter is tested against it (crates/aws/tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$("$root/scripts/python-tools.sh")"

. "$root/scripts/local-peer.sh"
port="$(free_port)"
log="$root/target/sqs-local-$port.log"
mkdir -p "$root/target"
"$bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT

wait_listening "the SQS peer (moto)" "$pid" "$port" "$log"

export SQS_ENDPOINT="http://127.0.0.1:$port"
"$@"
