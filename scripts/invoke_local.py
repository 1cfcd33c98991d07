#!/usr/bin/env python3
"""Feed every sample event in events/ to the real Lambdas running under `cargo lambda watch`,
and check each answer.

Run through `make invoke-local` (which starts DynamoDB Local and exports DYNAMODB_ENDPOINT).
Local peers only: DynamoDB Local for the tables; a small HTTP server here that answers like
API Gateway's @connections (200) and CloudWatch's PutMetricData (rpc-v2-cbor), recording what
the functions sent; and `wsdr lab`, whose primary Region the canary probes, healthy and then
down. Runs on the pinned tools venv (scripts/python-tools.sh): cbor2 for CloudWatch's CBOR,
PyJWT for the user token.
"""

import datetime
import http.server
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import cbor2
import jwt

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"
ISSUER = "https://auth.example.com"
AUDIENCE = "wsdr"
USER_SECRET = "local-user-secret-at-least-32-bytes!"
CANARY_SECRET = "local-canary-secret-at-least-32-bytes"
API_ID = "abc123def4"
PRIMARY_API_ID = "prim4567ab"


def put_verdict(endpoint, api_id, serve, prefix="JUDGE#"):
    """A fast verdict on `api_id`, written to DynamoDB Local's state table as its writer writes
    it (the watcher's: JUDGE#<apiId>/VERDICT; a Region's own canary's: HEALTH#<apiId>/VERDICT),
    through DynamoDB's JSON protocol."""
    item = {"pk": {"S": f"{prefix}{api_id}"}, "sk": {"S": "VERDICT"}, "serve": {"BOOL": serve},
            "atMs": {"N": str(int(time.time() * 1000))}}
    request = urllib.request.Request(
        endpoint, data=json.dumps({"TableName": "wsdr-state", "Item": item}).encode(),
        headers={"X-Amz-Target": "DynamoDB_20120810.PutItem",
                 "Content-Type": "application/x-amz-json-1.0",
                 # DynamoDB Local checks that a signature is there, not what it signs.
                 "Authorization": "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, "
                                  "SignedHeaders=host, Signature=0"})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
REGION = "us-east-1"
# The template's default seed (template.yaml, SeedAuctions): lot-1 is the auction in the events.
SEED = (
    '[{"id":"canary","item":"canary probe","startingPrice":1},'
    '{"id":"lot-1","item":"1959 Fender Stratocaster","startingPrice":100000,"minIncrement":1000}]'
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the local AWS peer: @connections, CloudWatch and Secrets Manager ---------------------------
SECRETS = {"wsdr/users": USER_SECRET, "wsdr/canary": CANARY_SECRET}


def health_minutes(api_id, start, end):
    """WebSocketHealth datapoints the canary put for `api_id`, as CloudWatch's GetMetricData
    returns them: the Minimum per minute, in [start, end), oldest first."""
    minutes = {}
    for path, body in Peer.seen:
        if not path.endswith("/operation/PutMetricData"):
            continue
        for datum in cbor2.loads(body).get("MetricData") or []:
            if datum.get("MetricName") != "WebSocketHealth" or datum.get("Dimensions") != [
                {"Name": "ApiId", "Value": api_id}
            ]:
                continue
            at = datum["Timestamp"].replace(second=0, microsecond=0)
            if start <= at < end:
                minutes[at] = min(minutes.get(at, 1.0), datum["Value"])
    return sorted(minutes.items())


def cbor_answer(handler, answer):
    raw = cbor2.dumps(answer, datetime_as_timestamp=True, timezone=datetime.timezone.utc)
    handler.send_response(200)
    handler.send_header("smithy-protocol", "rpc-v2-cbor")
    handler.send_header("content-type", "application/cbor")
    handler.send_header("content-length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


def secret_value(name):
    return {"ARN": f"arn:aws:secretsmanager:{REGION}:123456789012:secret:{name}-AbCdEf",
            "Name": name, "SecretString": SECRETS[name],
            "VersionId": "00000000-0000-0000-0000-000000000001",
            "VersionStages": ["AWSCURRENT"], "CreatedDate": 1767225600.0}


def secrets_answer(target, body):
    """(status, answer) as Secrets Manager gives them for GetSecretValue and
    BatchGetSecretValue (a secret it lacks: ResourceNotFoundException, or an entry in the
    batch's Errors); any other action or an unreadable body gets AWS's error shape, never an
    empty body."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return 400, {"__type": "SerializationException", "message": "body is not JSON"}
    if not isinstance(request, dict):
        return 400, {"__type": "SerializationException", "message": "body is not an object"}
    action = target.split(".", 1)[1]
    if action == "GetSecretValue":
        name = request.get("SecretId", "")
        if name in SECRETS:
            return 200, secret_value(name)
        return 400, {"__type": "ResourceNotFoundException",
                     "message": "Secrets Manager can't find the specified secret."}
    if action == "BatchGetSecretValue":
        names = request.get("SecretIdList")
        if not isinstance(names, list) or not names or "Filters" in request:
            return 400, {"__type": "InvalidParameterException",
                         "message": "You must provide either SecretIdList or Filters, but not both."}
        if len(names) > 20:
            return 400, {"__type": "InvalidParameterException",
                         "message": "SecretIdList may hold at most 20 secrets."}
        found = [secret_value(n) for n in names if n in SECRETS]
        errors = [{"SecretId": n, "ErrorCode": "ResourceNotFoundException",
                   "Message": "Secrets Manager can't find the specified secret."}
                  for n in names if n not in SECRETS]
        return 200, {"SecretValues": found, "Errors": errors}
    return 400, {"__type": "UnknownOperationException", "message": f"unknown operation {action}"}


class Peer(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Peer.seen.append((self.path, body))
        target = self.headers.get("x-amz-target") or ""
        if target.startswith("secretsmanager."):
            # awsJson1.1: the functions read their HS256 keys by secret name at cold start.
            status, answer = secrets_answer(target, body)
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/x-amz-json-1.1")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        elif self.path.endswith("/operation/PutMetricData"):
            cbor_answer(self, {})
        elif self.path.endswith("/operation/GetMetricData"):
            # The watcher reads its Region's recent health to compute the failover verdict.
            query = cbor2.loads(body)
            results = []
            for q in query.get("MetricDataQueries") or []:
                metric = q["MetricStat"]["Metric"]
                api_id = next(d["Value"] for d in metric["Dimensions"] if d["Name"] == "ApiId")
                points = health_minutes(api_id, query["StartTime"], query["EndTime"])
                results.append({"Id": q["Id"], "Label": metric["MetricName"],
                                "Timestamps": [at for at, _ in points],
                                "Values": [value for _, value in points],
                                "StatusCode": "Complete"})
            cbor_answer(self, {"MetricDataResults": results, "Messages": []})
        else:  # @connections: every post is delivered
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    def log_message(self, *args):
        pass


def start_lab(env):
    """`wsdr lab` (the two emulated Regions) with a known canary secret; returns the process,
    its control address and the primary Region's own WebSocket URL."""
    control = f"127.0.0.1:{free_port()}"
    log = open(ROOT / "target" / "invoke-local-lab.log", "w")
    proc = subprocess.Popen(
        [str(ROOT / "target" / "debug" / "wsdr"), "lab", "--listen", control],
        cwd=ROOT, env=dict(env, WSDR_LAB_CANARY_SECRET=CANARY_SECRET),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{control}/api/config", timeout=2) as r:
                config = json.load(r)
            return proc, control, config["regions"][0]
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("wsdr lab did not start: see target/invoke-local-lab.log")
            time.sleep(0.2)


def lab_fault(control, kind, region=0):
    request = urllib.request.Request(
        f"http://{control}/api/fault", method="POST",
        data=json.dumps({"kind": kind, "region": region, "ms": 0}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as r:
        r.read()


FUNCTIONS = ["ws-handler", "authorizer", "canary", "evacuator", "health"]


class Watch:
    """`cargo lambda watch`: the Lambda runtime and invoke APIs. By default it starts each
    function itself (`cargo run --bin NAME`, the card's local workflow). With `prebuilt` (a
    directory holding the five binaries, `make test`'s test build) it serves the APIs alone
    (`--only-lambda-apis`) and each function is that binary, started here on its first invoke
    with the runtime API Lambda would give it: `cargo run` would build the functions again with
    the features of a plain build (no dev-dependencies), minutes on a fresh clone."""

    def __init__(self, env, port, prebuilt=None):
        self.port = port
        self.env = env
        self.prebuilt = prebuilt
        self.functions = {}
        self.log = open(ROOT / "target" / "invoke-local-watch.log", "w")
        command = ["cargo", "lambda", "watch", "--invoke-address", "127.0.0.1", "--invoke-port", str(port)]
        if prebuilt:
            command += ["--only-lambda-apis", "--ignore-changes"]
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_function(self, function):
        """The prebuilt function's process, started once (Lambda's runtime API for it: the
        watch server's `/.rt/NAME`)."""
        if not self.prebuilt or function in self.functions:
            return
        env = dict(self.env)
        env.update({
            "AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{self.port}/.rt/{function}",
            "AWS_LAMBDA_FUNCTION_NAME": function, "AWS_LAMBDA_FUNCTION_VERSION": "1",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        })
        self.log.write(f"starting {function}: {self.prebuilt / function}\n")
        self.log.flush()
        self.functions[function] = subprocess.Popen(
            [str(self.prebuilt / function)], cwd=ROOT, env=env,
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def died(self, function):
        """Why the prebuilt function's process ended, or None while it runs."""
        proc = self.functions.get(function)
        if proc is None or proc.poll() is None:
            return None
        return f"{function} exited with code {proc.returncode}"

    def invoke(self, function, event):
        """The function's answer, or (None, why). A function that dies at init fails here at
        once with the lines the watch log shows for it, instead of waiting out the timeout
        (cargo lambda watch keeps the invoke open while the function restarts)."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(event, f)
        self.start_function(function)
        self.log.flush()
        seen = len(watch_log())
        proc = subprocess.Popen(
            ["cargo", "lambda", "invoke", function, "--invoke-address", "127.0.0.1",
             "--invoke-port", str(self.port), "--data-file", f.name, "--output-format", "json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.time() + 600  # the first invoke of a function builds it
        try:
            while proc.poll() is None:
                died = init_failure(watch_log()[seen:])
                if not died and self.died(function):
                    # the process is gone: its last lines are what it said (the watch log)
                    time.sleep(0.2)
                    died = init_failure(watch_log()[seen:]) or self.died(function)
                if died or time.time() > deadline:
                    proc.kill()
                    proc.communicate()
                    return None, died or "no answer within 600 s (target/invoke-local-watch.log)"
                time.sleep(0.5)
            out, err = proc.communicate()
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            return None, (out + err).strip()
        return json.loads(out), None

    def stop(self):
        for proc in self.functions.values():
            try:
                os.killpg(proc.pid, 15)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
        try:
            os.killpg(self.proc.pid, 15)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self.log.close()


def create_tables_command():
    """The table-creating binary: the one `make test`'s test build made (`--all-targets` builds
    a package's binaries for its integration tests) when it is newer than every source it is
    built from, else `cargo run`. Building it on its own resolves wsdr-aws's features without
    the dev-dependencies, another feature set: two minutes of rebuilding on a fresh clone."""
    built = ROOT / "target" / "debug" / "wsdr-local-tables"
    sources = [p for d in ("crates/aws", "crates/core", "crates/protocol", "crates/lambda", "crates/net")
               for p in (ROOT / d).rglob("*") if p.suffix in (".rs", ".toml")]
    sources += [ROOT / "Cargo.toml", ROOT / "Cargo.lock"]
    if built.exists() and all(built.stat().st_mtime > p.stat().st_mtime for p in sources):
        return [str(built)]
    return ["cargo", "run", "--quiet", "-p", "wsdr-aws", "--bin", "wsdr-local-tables", "--"]


def main():
    endpoint = os.environ["DYNAMODB_ENDPOINT"]
    failures = []

    def check(name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failures.append(name)

    subprocess.run(create_tables_command() + [endpoint, "wsdr-state", "wsdr-connections"],
                   cwd=ROOT, check=True)
    # The push jobs' queue on the local SQS peer: ws-handler runs as deployed (PUSH_QUEUE_URL
    # set), the stream's reader queueing jobs and the same binary running them from SQS.
    import boto3
    sqs = boto3.client("sqs", endpoint_url=os.environ["SQS_ENDPOINT"], region_name=REGION,
                       aws_access_key_id="local", aws_secret_access_key="local")
    push_queue = sqs.create_queue(QueueName="wsdr-push-jobs")["QueueUrl"]
    peer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Peer)
    threading.Thread(target=peer.serve_forever, daemon=True).start()
    peer_url = f"http://127.0.0.1:{peer.server_address[1]}"

    env = dict(os.environ)
    env.update({
        "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "AWS_ENDPOINT_URL_CLOUDWATCH": peer_url,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": peer_url,
        "AWS_ENDPOINT_URL_SQS": os.environ["SQS_ENDPOINT"], "PUSH_QUEUE_URL": push_queue,
        # ws-handler
        "STATE_TABLE": "wsdr-state", "CONNECTIONS_TABLE": "wsdr-connections",
        "WS_CALLBACK_URL": f"{peer_url}/prod", "SEED_AUCTIONS": SEED,
        # authorizer
        # authorizer and canary: keys by secret name, read at cold start as in AWS
        "JWT_ISSUER": ISSUER, "JWT_AUDIENCE": AUDIENCE, "JWT_ALGORITHMS": "HS256",
        "JWT_HS256_SECRET_ID": "wsdr/users", "CANARY_HS256_SECRET_ID": "wsdr/canary",
        # evacuator: this Region's connections, through the local @connections peer
        "TARGET_REGION": REGION, "TARGET_CONNECTIONS_TABLE": "wsdr-connections",
        "TARGET_CALLBACK_URL": f"{peer_url}/prod",
        # canary
        "API_ID": API_ID,
        # health (in the secondary, the judge): /primary answers for this API
        "PRIMARY_API_ID": PRIMARY_API_ID,
        "PROBES_PER_RUN": "1", "PROBE_TIMEOUT_SECONDS": "2",
        # The watcher's verdict, decided on one minute so one run can move it (AWS: 2 of 6).
        "VERDICT_FAILOVER_DATAPOINTS": "1", "VERDICT_WINDOW": "2",
    })
    # Build first, so the first invoke does not wait on the compiler under cargo lambda's timeout.
    # WSDR_LAMBDA_PREBUILT=1 (make test): the test build's binaries, which `--all-targets`
    # builds for the functions' integration tests (CARGO_BIN_EXE_*); asking cargo for that
    # build again finds it done.
    prebuilt = None
    if os.environ.get("WSDR_LAMBDA_PREBUILT") == "1":
        subprocess.run(["cargo", "test", "--workspace", "--all-targets", "--no-run", "--quiet"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        prebuilt = ROOT / "target" / "debug"
        missing = [f for f in FUNCTIONS + ["wsdr"] if not (prebuilt / f).exists()]
        if missing:
            raise SystemExit(f"the test build made no binary for {missing} under {prebuilt}")
    else:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "ws-handler", "--bin", "authorizer",
                        "--bin", "canary", "--bin", "evacuator", "--bin", "health", "--bin", "wsdr"],
                       cwd=ROOT, check=True)
    # The canary's target: the lab's primary Region (API Gateway semantics in front of the real
    # authorizer and handler), which the lab can take down.
    lab, control, primary = start_lab(env)
    env.update({"TARGET_URL": primary["url"], "EXPECTED_REGION": primary["region"]})
    watch = Watch(env, free_port(), prebuilt)
    try:
        deadline = time.time() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", watch.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or watch.proc.poll() is not None:
                    raise SystemExit("cargo lambda watch did not start: see target/invoke-local-watch.log")
                time.sleep(0.2)

        def event(name):
            return json.loads((EVENTS / name).read_text())

        def frame(reply):
            return json.loads(reply["body"]) if reply and reply.get("body") else {}

        # ws-handler: the whole life of one connection, from the sample events.
        reply, err = watch.invoke("ws-handler", event("connect.json"))
        check("ws-handler $connect", reply is not None and reply.get("statusCode") == 200, err or reply)
        reply, err = watch.invoke("ws-handler", event("connect-subprotocol.json"))
        headers = {k.lower(): v for k, v in ((reply or {}).get("headers") or {}).items()}
        check("ws-handler $connect with subprotocol",
              reply is not None and reply.get("statusCode") == 200
              and headers.get("sec-websocket-protocol") == "wsdr", err or reply)
        reply, err = watch.invoke("ws-handler", event("getState.json"))
        body = frame(reply)
        check("ws-handler getState", body.get("type") == "state" and body.get("region") == REGION
              and body.get("auction", {}).get("id") == "lot-1", err or body)
        reply, err = watch.invoke("ws-handler", event("bid.json"))
        body = frame(reply)
        check("ws-handler bid", body.get("type") == "bidResult" and body.get("status") == "accepted",
              err or body)
        reply, err = watch.invoke("ws-handler", event("bid.json"))
        body = frame(reply)
        check("ws-handler bid replayed", body.get("status") == "duplicate", err or body)
        reply, err = watch.invoke("ws-handler", event("getState.json"))
        body = frame(reply)
        high = (body.get("auction") or {}).get("highBid") or {}
        check("ws-handler getState after bid",
              high.get("amount") == 150000 and high.get("bidder") == "user-alice"
              and body.get("auction", {}).get("bidCount") == 1, err or body)
        # The push path as deployed: the stream's batch queues one job per subscriber shard
        # and posts nothing; the jobs, handed over as SQS hands them, post the new state.
        before = len(Peer.seen)
        reply, err = watch.invoke("ws-handler", event("dynamodb-stream.json"))
        check("ws-handler stream batch queues the push and posts nothing",
              reply == {"batchItemFailures": []} and len(Peer.seen) == before, err or reply)
        records = []
        for _ in range(10):
            got = sqs.receive_message(QueueUrl=push_queue, MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                break
            records += [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"],
                         "body": m["Body"], "eventSource": "aws:sqs"} for m in got]
        reply, err = watch.invoke("ws-handler", {"Records": records})
        pushes = [json.loads(body) for path, body in Peer.seen[before:] if "/@connections/" in path]
        check("ws-handler push jobs from SQS post the auction's new state",
              len(records) == 16 and reply == {"batchItemFailures": []} and pushes
              and all(p.get("type") == "bidUpdate" and (p.get("highBid") or {}).get("amount") == 150000
                      for p in pushes), err or (len(records), reply, pushes))
        reply, err = watch.invoke("ws-handler", event("heartbeat.json"))
        body = frame(reply)
        check("ws-handler heartbeat", body.get("type") == "pong" and body.get("region") == REGION,
              err or body)
        reply, err = watch.invoke("ws-handler", event("default.json"))
        body = frame(reply)
        check("ws-handler $default", body.get("type") == "error"
              and body.get("code") == "unknown_action", err or body)
        reply, err = watch.invoke("ws-handler", event("disconnect.json"))
        check("ws-handler $disconnect", reply is not None and reply.get("statusCode") == 200,
              err or reply)

        # evacuator: a connection is open again; every live one is told to move (moveTo).
        reply, err = watch.invoke("ws-handler", event("connect.json"))
        before = len(Peer.seen)
        reply, err = watch.invoke("evacuator", event("evacuate.json"))
        moves = [json.loads(body) for path, body in Peer.seen[before:] if "/@connections/" in path]
        check("evacuator moves every live connection",
              reply is not None and reply.get("connections", 0) >= 1
              and reply.get("delivered") == reply.get("connections")
              and len(moves) == reply.get("connections")
              and all(m.get("type") == "moveTo" and m.get("to") == "us-west-2"
                      and m.get("region") == REGION for m in moves), err or (reply, moves))
        reply, err = watch.invoke("evacuator", {"to": REGION})
        check("evacuator refuses a move to its own Region", reply is None and "other Region" in (err or ""),
              err or reply)
        # The census behind the herd hint: the live connections counted and recorded.
        reply, err = watch.invoke("evacuator", {"census": True})
        check("evacuator census counts the live connections",
              reply is not None and reply.get("region") == REGION and reply.get("connections", 0) >= 1
              and reply.get("countedAtMs", 0) > 0, err or reply)

        # health: a Route 53 checker's request through the function URL. Every answer is a 200
        # whose body the string-match check reads; only a fresh serve carries `verdict=serve`.
        def health_at(path):
            request = event("health-check.json")
            request["rawPath"] = path
            request["requestContext"]["http"]["path"] = path
            return watch.invoke("health", request)

        def says(reply, body):
            return reply is not None and reply.get("statusCode") == 200 and reply.get("body") == body
        reply, err = health_at("/self")
        check("health function: no verdict of its own yet is no evidence for its Region (200, verdict=none)",
              says(reply, "verdict=none (never written here)\n"), err or reply)
        put_verdict(endpoint, API_ID, True, prefix="HEALTH#")
        reply, err = health_at("/self")
        check("health function serves its own canary's verdict (/self)",
              says(reply, "verdict=serve\n"), err or reply)
        # The judge (this function knows the primary) answers the watcher's verdict at /primary.
        put_verdict(endpoint, PRIMARY_API_ID, False)
        reply, err = health_at("/primary")
        check("health function answers the watcher's fail-over with a 200 the check does not match",
              says(reply, "verdict=fail-over\n"), err or reply)
        put_verdict(endpoint, PRIMARY_API_ID, True)
        reply, err = health_at("/primary")
        check("health function serves the primary again once the watcher says so",
              says(reply, "verdict=serve\n"), err or reply)
        reply, err = health_at("/")
        check("health function answers nothing but its verdict paths (404)",
              reply is not None and reply.get("statusCode") == 404, err or reply)

        # authorizer: a valid user token is allowed on the exact method ARN; the placeholder is not.
        now = int(time.time())
        token = jwt.encode({"sub": "user-alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now,
                            "exp": now + 300}, USER_SECRET, algorithm="HS256")
        request = json.loads((EVENTS / "authorizer-request.json").read_text().replace("TOKEN", token))
        reply, err = watch.invoke("authorizer", request)
        statement = ((reply or {}).get("policyDocument") or {}).get("Statement") or [{}]
        check("authorizer valid token",
              reply is not None and reply.get("principalId") == "user-alice"
              and statement[0].get("Effect") == "Allow"
              and statement[0].get("Resource") in (request["methodArn"], [request["methodArn"]])
              and (reply.get("context") or {}).get("sub") == "user-alice", err or reply)
        reply, err = watch.invoke("authorizer", event("authorizer-request.json"))
        denied = (reply is None and "Unauthorized" in (err or "")) or (
            reply is not None
            and (((reply.get("policyDocument") or {}).get("Statement") or [{}])[0].get("Effect")
                 == "Deny"))
        check("authorizer garbage token", denied, err or reply)
        check("authorizer log never holds the token", token not in watch_log(), "token text absent")

        # canary: the lab's primary Region healthy, then down. The invocation succeeds both
        # times; the datapoint is the signal.
        def canary_run():
            before = len(Peer.seen)
            _, err = watch.invoke("canary", event("scheduled.json"))
            calls = Peer.seen[before:]
            puts = [cbor2.loads(body) for path, body in calls
                    if path.endswith("/operation/PutMetricData")]
            data = {d.get("MetricName"): d for put in puts for d in (put.get("MetricData") or [])}
            reads = [path for path, _ in calls if path.endswith("/operation/GetMetricData")]
            return err, puts, data, reads

        def health_ok(puts, data, value):
            health = data.get("WebSocketHealth") or {}
            return (all(p.get("Namespace") == "App" for p in puts)
                    and health.get("Value") == value
                    and health.get("Dimensions") == [{"Name": "ApiId", "Value": API_ID}]
                    and health.get("StorageResolution") == 60)

        def verdict(data):
            return (data.get("FailoverVerdict") or {}).get("Value")

        err, puts, data, reads = canary_run()
        latency = (data.get("ProbeLatency") or {}).get("Value")
        check("canary against a healthy Region (the lab)",
              err is None and health_ok(puts, data, 1) and isinstance(latency, (int, float)),
              err or puts)
        check("watcher verdict: serve (GetMetricData through the CBOR peer)",
              len(reads) == 1 and verdict(data) == 1, (reads, data.get("FailoverVerdict")))
        lab_fault(control, "down")
        err, puts, data, reads = canary_run()
        check("canary against the same Region down",
              err is None and health_ok(puts, data, 0) and "ProbeLatency" not in data,
              err or puts)
        check("watcher verdict: fail over", len(reads) == 1 and verdict(data) == 0,
              (reads, data.get("FailoverVerdict")))
        # The keys came from Secrets Manager by name (none is in the environment).
        asked = sorted({json.loads(body).get("SecretId") for path, body in Peer.seen
                        if body.startswith(b"{") and b"SecretId" in body})
        check("keys read from Secrets Manager at cold start", asked == ["wsdr/canary", "wsdr/users"], asked)
    finally:
        watch.stop()
        peer.shutdown()
        os.killpg(lab.pid, 15)
        lab.wait(timeout=30)

    if failures:
        print(f"{len(failures)} check(s) failed; function logs: target/invoke-local-watch.log")
        return 1
    print("every sample event answered as expected")
    return 0


INIT_FAILURE = re.compile(r"^(Error: .*|.*panicked at .*|.*(exited|terminated) with (code|status|signal).*)$",
                          re.MULTILINE)


def init_failure(log):
    """The lines of a watch log that say a function died (an error returned from main, a
    panic, an exit), joined; empty when there are none."""
    return "; ".join(m.group(0).strip() for m in INIT_FAILURE.finditer(log))


def watch_log():
    return (ROOT / "target" / "invoke-local-watch.log").read_text(errors="replace")


if __name__ == "__main__":
    sys.exit(main())
