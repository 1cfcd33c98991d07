# Sourced by the scripts that start a local peer for the tests (with-dynamodb-local.sh,
# with-sqs-local.sh): a free loopback port, and waiting until the peer listens on it.

# A loopback port nothing listens on now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_listening NAME PID PORT LOG: until PID listens on PORT (20 s at most); exits with
# LOG shown if the peer dies or never listens.
wait_listening() {
  local name="$1" pid="$2" port="$3" log="$4" ready=""
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || { echo "$name exited; see $log" >&2; cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "$name did not listen on port $port" >&2; exit 1; }
  echo "$name ready on 127.0.0.1:$port" >&2
}
