"""The deploy helpers against a fake `aws` on PATH: what each does with what the AWS CLI
answers (the account's Lambda concurrency; Route 53's TestDNSAnswer over time)."""

import os
import pathlib
import subprocess
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def fake_aws(tmp_path, body):
    """An `aws` executable whose behaviour is the shell `body` (arguments in "$@")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    aws = bin_dir / "aws"
    aws.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))
    aws.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("ALLOW_LOW_CONCURRENCY", None)
    return env


def run(script, args, env):
    return subprocess.run([str(ROOT / "scripts" / script), *args], env=env, capture_output=True, text=True, timeout=60)


def concurrency_aws(tmp_path, limit, unreserved, stack_reserved=None):
    functions = " ".join(stack_reserved or {})
    cases = "".join(f'    *{fn}*) echo {n};;\n' for fn, n in (stack_reserved or {}).items())
    return fake_aws(tmp_path, f"""
        case "$*" in
          *get-account-settings*) echo "{limit}	{unreserved}";;
          *list-stack-resources*) {"echo " + repr(functions) if stack_reserved is not None else "echo 'Stack does not exist' >&2; exit 254"};;
          *get-function-concurrency*)
            case "$*" in
{cases}              *) echo None;;
            esac;;
          *) echo "unexpected: $*" >&2; exit 2;;
        esac
        """)


def test_a_new_account_with_a_concurrency_of_ten_is_stopped_with_the_quota_to_raise(tmp_path):
    env = concurrency_aws(tmp_path, 10, 10)
    result = run("check-concurrency.sh", ["us-west-2", "wsdr-secondary", "9"], env)
    assert result.returncode == 1
    assert "L-B99A9384" in result.stderr and "is 10" in result.stderr
    # Knowingly: a warning, and on.
    env["ALLOW_LOW_CONCURRENCY"] = "1"
    result = run("check-concurrency.sh", ["us-west-2", "wsdr-secondary", "0"], env)
    assert result.returncode == 0 and "warning" in result.stderr


def test_a_reservation_must_leave_a_hundred_unreserved(tmp_path):
    env = concurrency_aws(tmp_path, 1000, 1000)
    ok = run("check-concurrency.sh", ["us-west-2", "wsdr-secondary", "9"], env)
    assert ok.returncode == 0, ok.stderr
    assert "leaving 991" in ok.stdout
    tight = concurrency_aws(tmp_path, 1000, 105)
    result = run("check-concurrency.sh", ["us-west-2", "wsdr-secondary", "9"], tight)
    assert result.returncode == 1 and "leave 96" in result.stderr


def test_a_redeploy_counts_what_the_stack_already_reserves(tmp_path):
    # 105 unreserved because the stack itself already holds 9: a redeploy needs nothing new.
    env = concurrency_aws(tmp_path, 1000, 105, {"wsdr-secondary-HealthFunction": 5, "wsdr-secondary-PrimaryWatcher": 2, "wsdr-secondary-Canary": 2})
    result = run("check-concurrency.sh", ["us-west-2", "wsdr-secondary", "9"], env)
    assert result.returncode == 0, result.stderr


def test_waiting_for_route_53_ends_when_it_answers_the_other_region(tmp_path):
    counter = tmp_path / "calls"
    counter.write_text("0")
    env = fake_aws(tmp_path, f"""
        n=$(( $(cat {counter}) + 1 )); echo $n > {counter}
        [ "$n" -lt 3 ] && echo d-primary.execute-api.us-east-1.amazonaws.com. || echo d-secondary.execute-api.us-west-2.amazonaws.com.
        """)
    result = run("wait-for-dns-answer.sh", ["Z1", "ws.example.com", "CNAME", "d-secondary.execute-api.us-west-2.amazonaws.com", "30", "0"], env)
    assert result.returncode == 0, result.stderr
    assert counter.read_text().strip() == "3", "asked until the answer changed, then stopped"


def test_waiting_for_route_53_is_bounded_and_says_what_it_still_answers(tmp_path):
    env = fake_aws(tmp_path, "echo d-primary.execute-api.us-east-1.amazonaws.com.\n")
    result = run("wait-for-dns-answer.sh", ["Z1", "ws.example.com", "CNAME", "d-secondary.execute-api.us-west-2.amazonaws.com", "1", "0"], env)
    assert result.returncode == 1
    assert "still answers" in result.stderr and "d-primary" in result.stderr


def test_make_evacuate_waits_on_route_53s_answer_not_on_checker_observations():
    makefile = (ROOT / "Makefile").read_text()
    evacuate = makefile[makefile.index("\nevacuate:"):makefile.index("\nrestore:")]
    assert "wait-for-dns-answer.sh" in evacuate
    assert "get-health-check-status --health-check-id \"$$check\"" not in evacuate


@pytest.mark.parametrize("failing,healthy", [(0, True), (3, True), (13, True), (14, False), (16, False)])
def test_a_health_check_is_healthy_by_route_53s_share_not_by_one_checker(tmp_path, failing, healthy):
    """make evacuate's pre-check: Route 53 calls a check healthy while more than 18% of its
    checkers report healthy; one failing checker (of 16) is not a failed check."""
    reports = ["Failure: Connection timed out"] * failing + ["Success: HTTP Status Code 200, OK"] * (16 - failing)
    env = fake_aws(tmp_path, "printf '%s\\t' " + " ".join(f"'{r}'" for r in reports) + "; echo\n")
    result = run("health-check-healthy.sh", ["hc-1"], env)
    assert (result.returncode == 0) == healthy, result.stdout + result.stderr
    assert f"{16 - failing} of 16 checkers" in result.stdout


DEPLOY_VARIABLES = {
    "DOMAIN": "ws.example.com", "HOSTED_ZONE_ID": "Z1", "CERT_ARN_PRIMARY": "arn:cert:1",
    "CERT_ARN_SECONDARY": "arn:cert:2", "JWT_ISSUER": "https://idp", "JWT_AUDIENCE": "app",
    "CANARY_SECRET_NAME": "wsdr/canary",
}


def make_deploy(target, sam, env, extra):
    """`make <target>` with a fake sam, the deploy variables set, an existing build."""
    return subprocess.run(
        ["make", "--no-print-directory", target, f"SAM={sam}", "SAM_BUILD=false",
         *[f"{k}={v}" for k, v in DEPLOY_VARIABLES.items()], *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def deploy_primary(tmp_path, stack_exists, extra=()):
    calls = tmp_path / "sam-calls"
    calls.unlink(missing_ok=True)
    sam = tmp_path / "bin" / "sam"
    env = fake_aws(tmp_path, f"""
        case "$*" in
          *get-account-settings*) echo "1000	1000";;
          *list-stack-resources*) echo "";;
          *describe-stacks*) {"echo ok" if stack_exists else "[ -f " + str(calls) + " ] && echo out-value || { echo 'Stack with id wsdr-primary does not exist' >&2; exit 254; }"};;
          *"ssm put-parameter"*) echo "$*" >> {tmp_path / "ssm-calls"};;
          *) echo "unexpected: $*" >&2; exit 2;;
        esac
        """)
    sam.write_text(f"#!/usr/bin/env bash\necho \"$*\" >> {calls}\n")
    sam.chmod(0o755)
    result = make_deploy("deploy-primary", sam, env, extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return calls.read_text().splitlines()


def test_the_first_create_of_the_primary_starts_without_deletion_protection(tmp_path):
    first, protect = deploy_primary(tmp_path, stack_exists=False)
    assert "DeletionProtection=false" in first.split()
    assert "DeletionProtection=true" in protect.split()
    assert "Role=primary" in first.split() and "--config-env primary" in first


def test_a_redeploy_of_the_primary_keeps_deletion_protection(tmp_path):
    (only,) = deploy_primary(tmp_path, stack_exists=True)
    assert "DeletionProtection=true" in only.split()


def test_make_smoke_targets_both_regions_and_the_global_name_with_the_users_token(tmp_path):
    env = fake_aws(tmp_path, """
        case "$*" in
          *wsdr-primary*RegionalEndpointUrl*) echo wss://use1.example.com;;
          *wsdr-secondary*RegionalEndpointUrl*) echo wss://usw2.example.com;;
          *wsdr-secondary*CustomDomainUrl*) echo wss://auction.example.com;;
          *) echo "unexpected: $*" >&2; exit 2;;
        esac
        """)
    calls = tmp_path / "cargo-calls"
    cargo = tmp_path / "bin" / "cargo"
    cargo.write_text(f'#!/usr/bin/env bash\necho "$* token=$WSDR_SMOKE_TOKEN" >> {calls}\n')
    cargo.chmod(0o755)
    result = subprocess.run(["make", "--no-print-directory", "smoke", f"CARGO={cargo}", "SMOKE_TOKEN=tok123"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    (call,) = calls.read_text().splitlines()
    assert "smoke" in call.split()
    for target in ("--target us-east-1=wss://use1.example.com", "--target us-west-2=wss://usw2.example.com",
                   "--target wss://auction.example.com"):
        assert target in call, call
    assert call.endswith("token=tok123"), "the token goes by environment, never on the command line"
    assert "tok123" not in call[: call.rindex("token=")]


def test_the_reference_settings_are_one_variable_away(tmp_path):
    (default,) = deploy_primary(tmp_path, stack_exists=True)
    assert "HealthCheckType=alarm" not in default
    (reference,) = deploy_primary(tmp_path, stack_exists=True, extra=["FAILOVER_SETTINGS=reference"])
    for setting in ("HealthCheckType=alarm", "AliasRecords=true", "DnsTtl=60"):
        assert setting in reference.split(), reference


def test_a_primary_deploy_copies_its_outputs_to_the_secondarys_region(tmp_path):
    """What deploy-secondary needs from the primary is kept where the secondary can read it
    while the primary's Region is down: Parameter Store in the secondary's Region."""
    deploy_primary(tmp_path, stack_exists=True)
    puts = (tmp_path / "ssm-calls").read_text().splitlines()
    names = sorted(call.split("--name ")[1].split()[0] for call in puts)
    assert names == sorted(f"/wsdr/primary/{k}" for k in (
        "ApiId", "RegionalDomainName", "RegionalHostedZoneId", "ConnectionsTableName", "StateTableName",
        "HealthUrlHost", "RegionVerdictAlarmName"))
    assert all("--region us-west-2" in call and "--overwrite" in call for call in puts), puts


def deploy_secondary(tmp_path, live_alias_records, extra=(), primary_answers=True, copies=None):
    """make deploy-secondary against a fake AWS whose secondary stack has AliasRecords =
    `live_alias_records` (None: no stack yet). Returns (exit code, output, sam calls)."""
    calls = tmp_path / "sam-calls"
    calls.unlink(missing_ok=True)
    sam = tmp_path / "bin" / "sam"
    if live_alias_records is None:
        secondary = "echo 'Stack with id wsdr-secondary does not exist' >&2; exit 254"
    else:
        secondary = f"echo {live_alias_records}"
    if primary_answers:
        primary = "echo live-$(echo \"$*\" | sed -n \"s/.*OutputKey=='\\([A-Za-z]*\\)'.*/\\1/p\")"
    else:
        primary = "echo 'Could not connect to the endpoint URL: \"https://cloudformation.us-east-1.amazonaws.com/\"' >&2; exit 255"
    if copies:
        ssm = "[[ \"$*\" == *us-west-2* ]] || exit 254; for a in \"$@\"; do [[ $a == /wsdr/primary/* ]] && echo copy-${a#/wsdr/primary/}; done; true"
    else:
        ssm = "echo 'An error occurred (ParameterNotFound)' >&2; exit 254"
    env = fake_aws(tmp_path, f"""
        case "$*" in
          *get-account-settings*) echo "1000	1000";;
          *list-stack-resources*) echo "";;
          *describe-stacks*wsdr-primary*) {primary};;
          *"ssm get-parameter"*) {ssm};;
          *describe-stacks*wsdr-secondary*AliasRecords*) {secondary};;
          *describe-table*) echo arn:aws:dynamodb:us-west-2:1:table/wsdr-state/stream/1;;
          *) echo "unexpected: $*" >&2; exit 2;;
        esac
        """)
    sam.write_text(f"#!/usr/bin/env bash\necho \"$*\" >> {calls}\n")
    sam.chmod(0o755)
    result = make_deploy("deploy-secondary", sam, env, extra)
    deploys = calls.read_text().splitlines() if calls.exists() else []
    return result.returncode, result.stdout + result.stderr, deploys


def alias_records(deploy):
    """The AliasRecords a sam deploy line sets (the last one wins; none given: the default)."""
    values = [w.split("=", 1)[1] for w in deploy.split() if w.startswith("AliasRecords=")]
    return values[-1] if values else "false"


def test_a_first_secondary_or_the_same_record_kind_deploys_once(tmp_path):
    for live in (None, "false"):
        code, output, deploys = deploy_secondary(tmp_path, live)
        assert code == 0, output
        assert [alias_records(d) for d in deploys] == ["false"], (live, deploys)
    code, output, deploys = deploy_secondary(tmp_path, "true", ["FAILOVER_SETTINGS=reference"])
    assert code == 0, output
    assert [alias_records(d) for d in deploys] == ["true"]


def test_switching_the_record_kind_in_one_update_is_refused_with_the_way_through(tmp_path):
    """CloudFormation creates the new records before deleting the old, and Route 53 refuses a
    CNAME beside an A record of the same name: one update would roll back."""
    code, output, deploys = deploy_secondary(tmp_path, "false", ["FAILOVER_SETTINGS=reference"])
    assert code != 0 and deploys == [], output
    assert "RECORD_SWITCH=two-step" in output and "AliasRecords=none" in output
    code, output, deploys = deploy_secondary(tmp_path, "true")
    assert code != 0 and deploys == [], output


def test_a_two_step_switch_removes_the_records_first(tmp_path):
    code, output, deploys = deploy_secondary(
        tmp_path, "false", ["FAILOVER_SETTINGS=reference", "RECORD_SWITCH=two-step"])
    assert code == 0, output
    assert [alias_records(d) for d in deploys] == ["none", "true"], deploys


def test_the_secondary_deploys_with_the_primarys_region_down(tmp_path):
    """The primary's Region refuses every call: deploy-secondary takes the primary's outputs
    from the copy in its own Region's Parameter Store and deploys."""
    code, output, deploys = deploy_secondary(tmp_path, "false", primary_answers=False, copies=True)
    assert code == 0, output
    (deploy,) = deploys
    assert "PrimaryApiId=copy-ApiId" in deploy.split(), deploy
    assert "PrimaryConnectionsTableName=copy-ConnectionsTableName" in deploy.split(), deploy
    assert "using the copy in us-west-2's Parameter Store" in output
    # While the primary answers, its own outputs win over the copy.
    code, output, deploys = deploy_secondary(tmp_path, "false", primary_answers=True, copies=True)
    assert code == 0, output
    assert "PrimaryApiId=live-ApiId" in deploys[0].split(), deploys
    # Neither: nothing to deploy against.
    code, output, deploys = deploy_secondary(tmp_path, "false", primary_answers=False, copies=False)
    assert code != 0 and deploys == [] and "deploy the primary first" in output, output


def invoke_local():
    """scripts/invoke_local.py as a module (its peer and log reader, without running it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("invoke_local", ROOT / "scripts" / "invoke_local.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ask_peer(module, target, body):
    import http.server
    import json
    import threading
    import urllib.error
    import urllib.request

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), module.Peer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/", method="POST", data=body,
            headers={"x-amz-target": target, "content-type": "application/x-amz-json-1.1"})
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
    finally:
        server.shutdown()


def test_the_local_secrets_peer_answers_a_batch_read_as_aws_does():
    module = invoke_local()
    status, answer = ask_peer(module, "secretsmanager.BatchGetSecretValue",
                              b'{"SecretIdList": ["wsdr/canary", "wsdr/users", "nope"]}')
    assert status == 200
    assert [v["Name"] for v in answer["SecretValues"]] == ["wsdr/canary", "wsdr/users"]
    assert all(v["SecretString"] for v in answer["SecretValues"])
    assert answer["Errors"] == [{"SecretId": "nope", "ErrorCode": "ResourceNotFoundException",
                                 "Message": "Secrets Manager can't find the specified secret."}]
    status, answer = ask_peer(module, "secretsmanager.GetSecretValue", b'{"SecretId": "wsdr/users"}')
    assert (status, answer["Name"]) == (200, "wsdr/users")
    status, answer = ask_peer(module, "secretsmanager.GetSecretValue", b'{"SecretId": "nope"}')
    assert (status, answer["__type"]) == (400, "ResourceNotFoundException")


def test_a_wrong_secrets_request_gets_an_aws_error_not_an_empty_body():
    module = invoke_local()
    for target, body, kind in [
        ("secretsmanager.BatchGetSecretValue", b"{}", "InvalidParameterException"),
        ("secretsmanager.BatchGetSecretValue", b"not json", "SerializationException"),
        ("secretsmanager.ListSecrets", b"{}", "UnknownOperationException"),
    ]:
        status, answer = ask_peer(module, target, body)
        assert (status, answer["__type"]) == (400, kind), target


def test_a_function_that_dies_at_init_is_read_from_the_watch_log():
    module = invoke_local()
    log = ('INFO starting authorizer\n'
           'Error: Malformed { id: "wsdr/canary,wsdr/users", reason: "unreadable answer" }\n')
    assert "Malformed" in module.init_failure(log)
    assert module.init_failure("INFO function ready\nINFO invoked\n") == ""


def test_the_concurrency_check_counts_every_reservation(tmp_path):
    """What each stack reserves is counted before a deploy: the decision path (each Region's
    health function, 5, and canary, 2; the secondary's watcher, 2), the push workers (16: their
    SQS mapping's maximum concurrency), the secondary's evacuator of the primary (2) and the
    authorizer when AUTHORIZER_RESERVED_CONCURRENCY asks; the deploy passes the authorizer's."""
    env = concurrency_aws(tmp_path, 1000, 150)
    check = lambda *extra: subprocess.run(  # noqa: E731
        ["make", "--no-print-directory", "check-concurrency", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    plain = check()
    assert plain.returncode == 0, plain.stdout + plain.stderr
    out = plain.stdout + plain.stderr
    assert "wsdr-primary reserves 23" in out and "wsdr-secondary reserves 27" in out, out
    reserved = check("AUTHORIZER_RESERVED_CONCURRENCY=30")
    assert reserved.returncode != 0, reserved.stdout + reserved.stderr
    assert "reserving 53" in reserved.stdout + reserved.stderr
    (deploy,) = deploy_primary(tmp_path, stack_exists=True, extra=["AUTHORIZER_RESERVED_CONCURRENCY=20"])
    assert "AuthorizerReservedConcurrency=20" in deploy.split()
    assert "PushWorkers=16" in deploy.split()
    (default,) = deploy_primary(tmp_path, stack_exists=True)
    assert "AuthorizerReservedConcurrency" not in default


