#!/usr/bin/env bash
# Run a command with a local SQS peer (moto's server, from the pinned Python tools) listening
# on a free loopback port, exported to the command as SQS_ENDPOINT; stop it afterwards,
# whatever happens. The push path's queue adapter is tested against it (crates/aws/tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$("$root/scripts/python-tools.sh")"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
log="$root/target/sqs-local.log"
mkdir -p "$root/target"
"$bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT

for _ in $(seq 1 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ready=1; break; fi
  kill -0 "$pid" 2>/dev/null || { echo "the SQS peer exited; see $log" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ "${ready:-}" = 1 ] || { echo "the SQS peer did not listen on port $port" >&2; exit 1; }
echo "SQS peer (moto) ready on 127.0.0.1:$port" >&2

export SQS_ENDPOINT="http://127.0.0.1:$port"
"$@"
