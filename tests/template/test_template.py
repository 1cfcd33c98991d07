"""template.yaml, loaded with cfn-lint's own decoder (it understands !Ref, !Sub, ...), checked
against what wsdr promises: routes and authorizer, alarm and health check settings, failover
records, TTL, GSI, replicas, least-privilege policies, and env vars the binaries really read."""

import json
import pathlib
import re

import pytest
from cfnlint.decode import decode

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template():
    tpl, matches = decode(str(ROOT / "template.yaml"))
    assert not matches, matches
    return tpl


def resources(tpl, kind):
    return {k: v for k, v in tpl["Resources"].items() if v["Type"] == kind}


def test_websocket_api_routes_on_action(template):
    (api,) = resources(template, "AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "WEBSOCKET"
    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in resources(template, "AWS::ApiGatewayV2::Route").values()}
    assert set(routes) == {"$connect", "$disconnect", "bid", "getState", "heartbeat", "$default"}
    for key, route in routes.items():
        assert route["Target"] == {"Fn::Sub": "integrations/${HandlerIntegration}"}, key
    replying = {r["Properties"]["RouteId"]["Ref"] for r in resources(template, "AWS::ApiGatewayV2::RouteResponse").values()}
    assert replying == {"BidRoute", "GetStateRoute", "HeartbeatRoute", "DefaultRoute"}


def test_connect_route_uses_the_jwt_request_authorizer(template):
    connect = template["Resources"]["ConnectRoute"]["Properties"]
    assert connect["AuthorizationType"] == "CUSTOM"
    assert connect["AuthorizerId"] == {"Ref": "Authorizer"}
    authorizer = template["Resources"]["Authorizer"]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert "${AuthorizerFunction.Arn}" in authorizer["AuthorizerUri"]["Fn::Sub"]
    assert "IdentitySource" not in authorizer, "query string OR subprotocol: no single identity source"


def test_functions_are_rust_on_arm64_with_tracing_and_json_logs(template):
    globals_ = template["Globals"]["Function"]
    assert globals_["Runtime"] == "provided.al2023"
    assert globals_["Architectures"] == ["arm64"]
    assert globals_["Handler"] == "bootstrap"
    assert globals_["Tracing"] == "Active"
    functions = resources(template, "AWS::Serverless::Function")
    assert set(functions) == {
        "WsHandlerFunction", "AuthorizerFunction", "CanaryFunction", "PrimaryWatcherFunction",
        "EvacuatorFunction", "PrimaryEvacuatorFunction", "HealthFunction", "PushWorkerFunction",
    }
    for name, fn in functions.items():
        assert fn["Metadata"]["BuildMethod"] == "rust-cargolambda", name
        binary = fn["Metadata"]["BuildProperties"]["Binary"]
        assert (ROOT / "crates" / binary / "src" / "main.rs").exists(), f"{name}: no binary {binary}"
        assert fn["Properties"]["LoggingConfig"]["LogFormat"] == "JSON", name


def test_env_vars_are_ones_the_binaries_read(template):
    sources = {b: "".join(p.read_text() for p in (ROOT / "crates" / b / "src").glob("*.rs")) for b in ("ws-handler", "authorizer", "canary", "evacuator", "health")}
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        binary = fn["Metadata"]["BuildProperties"]["Binary"]
        for var in fn["Properties"]["Environment"]["Variables"]:
            if var.endswith("_SECRET_ID"):
                # Read through wsdr_secrets::SecretEnv::read(&["<VAR>"], ..) at cold start.
                plain = var[: -len("_ID")]
                assert f'"{plain}"' in sources[binary] and "SecretEnv::read" in sources[binary], f"{name} sets {var}, which {binary} never reads"
                continue
            assert f'"{var}"' in sources[binary], f"{name} sets {var}, which {binary} never reads"


def test_state_table_is_a_global_table_with_both_replicas(template):
    table = template["Resources"]["StateTable"]
    assert table["Type"] == "AWS::DynamoDB::GlobalTable"
    assert table["Condition"] == "IsPrimary", "only the primary stack creates it"
    props = table["Properties"]
    replicas = props["Replicas"][:2]
    regions = [r["Region"] for r in replicas]
    assert regions == [{"Ref": "PrimaryRegion"}, {"Ref": "SecondaryRegion"}]
    # Strong mode's third replica, only when asked for.
    third = props["Replicas"][2]["Fn::If"]
    assert third[0] == "StrongWithThirdReplica" and third[2] == {"Ref": "AWS::NoValue"}
    replicas.append(third[1])
    for replica in replicas:
        assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert replica["DeletionProtectionEnabled"] == {"Ref": "DeletionProtection"}
    assert props["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert [k["AttributeName"] for k in props["KeySchema"]] == ["pk", "sk"]
    # A bidder's copies newest first: the table's sort key is bidId order, not time.
    (by_time, by_position) = props["GlobalSecondaryIndexes"]
    assert by_time["IndexName"] == "by-time"
    assert [(k["AttributeName"], k["KeyType"]) for k in by_time["KeySchema"]] == [("pk", "HASH"), ("at", "RANGE")]
    assert {"AttributeName": "at", "AttributeType": "N"} in props["AttributeDefinitions"]
    # One log of a topic in position order: wsdr_aws::schema's LOG / POSITION.
    assert by_position["IndexName"] == "by-position"
    assert [(k["AttributeName"], k["KeyType"]) for k in by_position["KeySchema"]] == [("log", "HASH"), ("position", "RANGE")]
    assert {"AttributeName": "log", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert {"AttributeName": "position", "AttributeType": "N"} in props["AttributeDefinitions"]


def test_connections_table_has_ttl_and_the_shard_index(template):
    props = template["Resources"]["ConnectionsTable"]["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    old, shard = props["GlobalSecondaryIndexes"]
    # The old index stays one release (one GSI created or deleted per table update).
    assert old["IndexName"] == "by-auction"
    assert shard["IndexName"] == "by-auction-shard"
    assert [k["AttributeName"] for k in shard["KeySchema"]] == ["auctionShard", "pk"]
    assert "expiresAt" in shard["Projection"]["NonKeyAttributes"]
    assert {"AttributeName": "auctionShard", "AttributeType": "S"} in props["AttributeDefinitions"]
    # The handler reads the shard index only.
    stmt = next(s for s in _statements(template["Resources"]["WsHandlerFunction"]) if s["Sid"] == "ConnectionsTable")
    assert {"Fn::Sub": "${ConnectionsTable.Arn}/index/by-auction-shard"} in stmt["Resource"]
    assert {"Fn::Sub": "${ConnectionsTable.Arn}/index/by-auction"} not in stmt["Resource"]


def test_paging_alarm_is_the_asymmetric_m_of_n_rule_on_raw_health(template):
    props = template["Resources"]["RegionHealthAlarm"]["Properties"]
    assert props["Namespace"] == "App" and props["MetricName"] == "WebSocketHealth"
    assert props["Dimensions"][0]["Name"] == "ApiId"
    assert props["Period"] == 60
    assert props["Statistic"] == "Minimum"
    assert props["ComparisonOperator"] == "LessThanThreshold" and props["Threshold"] == 1
    assert props["TreatMissingData"] == "breaching"
    assert props["DatapointsToAlarm"] == {"Ref": "FailoverDatapoints"}
    params = template["Parameters"]
    assert params["FailoverDatapoints"]["Default"] == 2
    # Failback is slower: N = healthy datapoints + 1 > M.
    window = template["Mappings"]["FailbackWindow"]
    assert props["EvaluationPeriods"] == {"Fn::FindInMap": ["FailbackWindow", {"Ref": "FailbackHealthyDatapoints"}, "EvaluationPeriods"]}
    for healthy, row in window.items():
        assert row["EvaluationPeriods"] == int(healthy) + 1
    assert int(params["FailbackHealthyDatapoints"]["Default"]) >= 5


@pytest.mark.parametrize("alarm", ["PrimaryHealthAlarm", "RegionVerdictAlarm"])
def test_health_check_alarms_are_one_period_of_a_verdict_and_ignore_silence(template, alarm):
    """What Route 53 evaluates (the data stream, with the stored period, statistic, threshold
    and evaluation periods) is then exactly the alarm's state."""
    props = template["Resources"][alarm]["Properties"]
    assert props["Namespace"] == "App" and props["MetricName"] == "FailoverVerdict"
    assert (props["Period"], props["Statistic"]) == (60, "Minimum")
    assert props["ComparisonOperator"] == "LessThanThreshold" and props["Threshold"] == 1
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (1, 1)
    assert props["TreatMissingData"] == "missing", "a silent watcher is not a failed Region"
    for value in props.values():
        assert "Ref" not in json.dumps(value).replace('"Ref": "PrimaryApiId"', "").replace('"Ref": "WebSocketApi"', "").replace('"Ref": "AlarmTopicArn"', "").replace('"Ref": "AWS::NoValue"', ""), (
            "no tunable in a health check's alarm: Route 53 would never see its change"
        )


def test_watchers_compute_the_failover_rule(template):
    res = template["Resources"]
    for name in ("PrimaryWatcherFunction", "CanaryFunction"):
        env = res[name]["Properties"]["Environment"]["Variables"]
        assert env["VERDICT_FAILOVER_DATAPOINTS"] == {"Ref": "FailoverDatapoints"}, name
        assert env["VERDICT_WINDOW"] == {"Fn::FindInMap": ["FailbackWindow", {"Ref": "FailbackHealthyDatapoints"}, "EvaluationPeriods"]}, name
        actions = [st["Action"] for st in res[name]["Properties"]["Policies"][0]["Statement"]]
        assert "cloudwatch:GetMetricData" in actions, name


def test_failover_decision_lives_in_the_secondary(template):
    """The watcher and its verdict alarm run in the secondary, outside the Region they judge;
    every check is created there (docs/DEPLOY.md, "Who decides")."""
    res = template["Resources"]
    assert res["PrimaryHealthAlarm"]["Condition"] == "IsSecondary"
    assert res["PrimaryWatcherFunction"]["Condition"] == "IsSecondary"
    watcher_env = res["PrimaryWatcherFunction"]["Properties"]["Environment"]["Variables"]
    # The primary through its custom domain: the failover name, dialled at the primary's
    # own regional domain endpoint (its certificate and API mapping on the path).
    assert watcher_env["TARGET_URL"] == {"Fn::Sub": "wss://${DomainName}"}
    assert watcher_env["TARGET_CONNECT_TO"] == {"Ref": "PrimaryRegionalDomainName"}
    assert watcher_env["API_ID"] == {"Ref": "PrimaryApiId"}
    assert res["PrimaryHealthAlarm"]["Properties"]["Dimensions"][0]["Value"] == {"Ref": "PrimaryApiId"}
    for name in ("PrimaryVerdictCheck", "PrimarySelfCheck", "PrimaryHealthCheck", "SecondaryHealthCheck", "SecondaryVerdictCheck"):
        assert res[name]["Condition"] == "IsSecondary", name


def endpoint_and_alarm(res, name):
    condition, endpoint, alarm = res[name]["Properties"]["HealthCheckConfig"]["Fn::If"]
    assert condition == "EndpointChecks", name
    return endpoint, alarm


def test_the_primary_record_is_healthy_while_either_view_of_the_primary_serves(template):
    """Route 53 answers the secondary only when the PRIMARY record is unhealthy and the
    SECONDARY one healthy; both unhealthy answers the primary. The PRIMARY record's check is
    a calculated OR of two views, each read where it is decided: the watcher's verdict at the
    secondary's health function (/primary), the primary's own canary's at the primary's
    (/self), reached by Route 53's checkers from outside both Regions. Every endpoint check is
    a string match on a 200 body: no status code, cache or last-known rule in between."""
    res = template["Resources"]
    calculated = res["PrimaryHealthCheck"]["Properties"]["HealthCheckConfig"]
    assert calculated["Type"] == "CALCULATED"
    assert calculated["ChildHealthChecks"] == [{"Ref": "PrimaryVerdictCheck"}, {"Ref": "PrimarySelfCheck"}]
    assert calculated["HealthThreshold"] == 1, "either view keeps the primary"
    own_url = {"Fn::Select": [2, {"Fn::Split": ["/", {"Fn::GetAtt": ["HealthFunctionUrl", "FunctionUrl"]}]}]}
    for name, host, path in (
        ("PrimaryVerdictCheck", own_url, "/primary"),
        ("PrimarySelfCheck", {"Ref": "PrimaryHealthUrlHost"}, "/self"),
        ("SecondaryVerdictCheck", own_url, "/self"),
    ):
        endpoint, _ = endpoint_and_alarm(res, name)
        assert endpoint["Type"] == "HTTPS_STR_MATCH", name
        assert endpoint["SearchString"] == "verdict=serve", name
        assert endpoint["FullyQualifiedDomainName"] == host, name
        assert endpoint["ResourcePath"] == path, name
        assert (endpoint["RequestInterval"], endpoint["FailureThreshold"], endpoint["EnableSNI"]) == (10, 1, True), name
        assert "Inverted" not in endpoint, name
    # The search string is what the health function answers for a fresh serve only.
    verdict = (ROOT / "crates" / "core" / "src" / "verdict.rs").read_text()
    assert 'SEARCH_STRING: &str = "verdict=serve"' in verdict
    # With alarm checks, the same two views from their minute alarms: silence is no evidence.
    _, outside = endpoint_and_alarm(res, "PrimaryVerdictCheck")
    _, inside = endpoint_and_alarm(res, "PrimarySelfCheck")
    assert outside["AlarmIdentifier"] == {"Name": {"Ref": "PrimaryHealthAlarm"}, "Region": {"Ref": "AWS::Region"}}
    assert inside["AlarmIdentifier"] == {"Name": {"Ref": "PrimaryVerdictAlarmName"}, "Region": {"Ref": "PrimaryRegion"}}
    for config in (outside, inside):
        assert config["Type"] == "CLOUDWATCH_METRIC"
        assert config["InsufficientDataHealthStatus"] == "Unhealthy", "a silent view says nothing for the primary"
    # The secondary must be given the primary's own view (make deploy-secondary passes it).
    rule = template["Rules"]["SecondaryReadsThePrimarysOwnView"]
    assert "PrimaryHealthUrlHost" in json.dumps(rule) and "PrimaryVerdictAlarmName" in json.dumps(rule)
    makefile = (ROOT / "Makefile").read_text()
    assert "PrimaryHealthUrlHost=" in makefile and "PrimaryVerdictAlarmName=" in makefile


def verdict_check(side):
    """The record's own check: the PRIMARY's either view, the SECONDARY's its endpoint."""
    return {"Ref": f"{side}HealthCheck"}


def health_check_by_failover_control(side):
    """The record's check for each FailoverControl: the verdict alarm's, the plan's, or both."""
    return {
        "Fn::If": [
            "AlarmOnly",
            verdict_check(side),
            {"Fn::If": ["RegionSwitchOnly", {"Ref": f"RegionSwitch{side}HealthCheckId"}, {"Ref": f"{side}CombinedHealthCheck"}]},
        ]
    }


def test_failover_records_each_have_their_health_check(template):
    records = {
        name: r
        for name, r in resources(template, "AWS::Route53::RecordSet").items()
        if "Failover" in r["Properties"] and not name.startswith("Rehearsal")
    }
    assert len(records) == 4
    for name, record in records.items():
        props = record["Properties"]
        assert props["Name"] == {"Ref": "DomainName"}
        # Without a check on the SECONDARY record, Route 53 would answer the secondary
        # whenever the primary's check fails, whatever state the secondary is in.
        side = {"PRIMARY": "Primary", "SECONDARY": "Secondary"}[props["Failover"]]
        assert props["HealthCheckId"] == health_check_by_failover_control(side), name
        if props["Type"] == "CNAME":
            assert props["TTL"] == {"Ref": "DnsTtl"}
        else:
            assert props["AliasTarget"]["EvaluateTargetHealth"] is False
    # wsdr's defaults: CNAME records with a 20 s TTL (alias records are API Gateway's 60 s).
    assert template["Parameters"]["DnsTtl"]["Default"] == 20
    assert template["Parameters"]["AliasRecords"]["Default"] == "false"


def test_the_secondary_record_is_its_api_endpoint_reachable(template):
    """The SECONDARY record's check says nothing the judge decides: a TCP check of the
    secondary's API endpoint. A herd that fails the secondary's own probes cannot make it
    unhealthy (which, with the primary failed, would answer the failed primary), and a
    secondary lost after a failover releases the name to the primary at once (both records
    unhealthy answers the primary). No calculated hold, no inverted check remain."""
    res = template["Resources"]
    config = res["SecondaryHealthCheck"]["Properties"]["HealthCheckConfig"]
    assert config == {
        "Type": "TCP",
        "FullyQualifiedDomainName": {"Fn::GetAtt": ["CustomDomain", "RegionalDomainName"]},
        "Port": 443,
        "RequestInterval": 10,
        "FailureThreshold": 1,
    }
    for gone in ("PrimaryFailedHealthCheck", "SecondaryHoldsHealthCheck"):
        assert gone not in res, gone
    assert "Inverted" not in json.dumps({k: v for k, v in res.items() if v["Type"] == "AWS::Route53::HealthCheck"})
    combined = res["SecondaryCombinedHealthCheck"]["Properties"]["HealthCheckConfig"]
    assert combined["ChildHealthChecks"][0] == {"Ref": "SecondaryHealthCheck"}


def test_alias_records_none_makes_no_failover_records(template):
    """The first of the two deploys that switch record kinds (scripts/record-kind-guard.sh)."""
    assert template["Parameters"]["AliasRecords"]["AllowedValues"] == ["true", "false", "none"]
    conditions = template["Conditions"]
    assert conditions["UseAlias"] == {"Fn::And": [{"Condition": "IsSecondary"}, {"Fn::Equals": [{"Ref": "AliasRecords"}, "true"]}]}
    assert conditions["UseCname"] == {"Fn::And": [{"Condition": "IsSecondary"}, {"Fn::Equals": [{"Ref": "AliasRecords"}, "false"]}]}
    for name, record in resources(template, "AWS::Route53::RecordSet").items():
        if "Failover" in record["Properties"] and not name.startswith("Rehearsal"):
            assert record["Condition"] in ("UseAlias", "UseCname"), name


def test_custom_domain_is_regional_tls12_and_mapped(template):
    domain = template["Resources"]["CustomDomain"]["Properties"]
    (config,) = domain["DomainNameConfigurations"]
    assert config["EndpointType"] == "REGIONAL" and config["SecurityPolicy"] == "TLS_1_2"
    mapping = template["Resources"]["CustomDomainMapping"]["Properties"]
    assert mapping["ApiId"] == {"Ref": "WebSocketApi"}


def _statements(fn):
    """Every statement a function may hold: a conditional one (Fn::If) as each branch that
    is a statement."""
    out = []
    for policy in fn["Properties"].get("Policies", []):
        for st in policy["Statement"]:
            if "Fn::If" in st:
                out.extend(b for b in st["Fn::If"][1:] if isinstance(b, dict) and "Effect" in b)
            else:
                out.append(st)
    return out


def test_policies_are_scoped(template):
    res = template["Resources"]
    handler = _statements(res["WsHandlerFunction"])
    for st in handler:
        resources_ = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        assert "*" not in resources_, st
    manage = next(s for s in handler if s["Action"] == "execute-api:ManageConnections")
    assert "${WebSocketApi}/${StageName}/POST/@connections/*" in manage["Resource"]["Fn::Sub"]
    state = next(s for s in handler if s["Sid"] == "StateTable")
    state_arns = [r["Fn::Sub"] for r in state["Resource"]]
    assert state_arns[0].endswith("table/${StateTableName}")
    assert state_arns[1].endswith("table/${StateTableName}/index/by-time"), "getState's newest bids"
    assert state_arns[2].endswith("table/${StateTableName}/index/by-position"), "getState's log since"
    assert not any("Scan" in a or "DeleteTable" in a for s in handler for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))
    for name in ("CanaryFunction", "PrimaryWatcherFunction"):
        records, put, read, key = _statements(res[name])
        assert records["Action"] == ["dynamodb:GetItem", "dynamodb:PutItem"], "its fast rounds and verdict, nothing else"
        assert records["Resource"]["Fn::Sub"].endswith(":table/${StateTableName}")
        assert put["Action"] == "cloudwatch:PutMetricData"
        assert put["Condition"] == {"StringEquals": {"cloudwatch:namespace": "App"}}
        assert read["Action"] == "cloudwatch:GetMetricData", "read-only, for the verdict"
        assert key["Action"] == "secretsmanager:GetSecretValue"
        assert key["Resource"]["Fn::Sub"].endswith(":secret:${CanarySecretName}-??????"), "its own key only"
    (keys,) = _statements(res["AuthorizerFunction"])
    assert keys["Action"] == "secretsmanager:GetSecretValue", "the authorizer reads its keys and nothing else"
    assert all("secret:${" in r["Fn::Sub"] for r in keys["Resource"] if "Fn::Sub" in r)
    # Never BatchGetSecretValue: 100 requests per second per Region, not adjustable, on the
    # reconnect path of every cold start.
    assert "BatchGetSecretValue" not in json.dumps(res["AuthorizerFunction"])
    assert res["AuthorizerInvokePermission"]["Properties"]["SourceArn"]["Fn::Sub"].endswith("/authorizers/${Authorizer}")


def test_push_jobs_go_through_one_queue_to_workers_capped_at_the_worker_count(template):
    """The stream's reader only starts pushes: it sends jobs to PushJobs; PushWorkerFunction
    (the same binary) runs them from an SQS event whose maximum concurrency is PushWorkers,
    reporting failed jobs one by one; the queue redrives to a dead-letter queue and its
    visibility timeout is at least six times the workers' timeout (Lambda's SQS guidance)."""
    res = template["Resources"]
    queue = res["PushJobs"]["Properties"]
    worker = res["PushWorkerFunction"]
    assert worker["Metadata"]["BuildProperties"]["Binary"] == "ws-handler"
    props = worker["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * props["Timeout"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["PushJobsDeadLetters", "Arn"]}
    assert 1 <= queue["RedrivePolicy"]["maxReceiveCount"] <= 5
    assert queue["SqsManagedSseEnabled"] is True
    event = props["Events"]["PushJobs"]
    assert event["Type"] == "SQS"
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["PushJobs", "Arn"]}
    assert event["Properties"]["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "PushWorkers"}}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # One job per invocation, as the benchmark models it (crates/bench/src/hot.rs, WORKER_BATCH).
    assert event["Properties"]["BatchSize"] == 1
    assert "const WORKER_BATCH: usize = 1;" in (ROOT / "crates" / "bench" / "src" / "hot.rs").read_text()
    # SQS's maximum concurrency is 2 to 1,000: the parameter cannot ask for less.
    assert template["Parameters"]["PushWorkers"]["MinValue"] >= 2
    for name in ("WsHandlerFunction", "PushWorkerFunction"):
        env = res[name]["Properties"]["Environment"]["Variables"]
        assert env["PUSH_QUEUE_URL"] == {"Ref": "PushJobs"}, name
        for var, param in (("PUSH_WORKERS", "PushWorkers"), ("PUSH_BUDGET_PER_SECOND", "PushBudgetPerSecond")):
            assert env[var] == {"Ref": param}, (name, var)
        sends = [s for s in _statements(res[name]) if s["Sid"] == "QueuePushJobs"]
        assert sends and sends[0]["Action"] == "sqs:SendMessage"
        assert sends[0]["Resource"] == {"Fn::GetAtt": ["PushJobs", "Arn"]}
        leases = next(s for s in _statements(res[name]) if s["Sid"] == "ConnectionsTable")
        assert "dynamodb:UpdateItem" in leases["Action"], "the push leases"
    # Both settings the worker reads are in its binary.
    source = (ROOT / "crates" / "ws-handler" / "src" / "config.rs").read_text()
    assert '"PUSH_QUEUE_URL"' in source
    assert "is_push_job_event" in (ROOT / "crates" / "ws-handler" / "src" / "stream.rs").read_text()
    # The worker posts, reads pages and leases; it never scans, writes state or deletes tables.
    worker_actions = {a for s in _statements(worker) for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert not worker_actions & {"dynamodb:Scan", "dynamodb:PutItem", "dynamodb:DeleteTable"}


def test_canaries_run_every_minute(template):
    res = template["Resources"]
    for name in ("CanaryFunction", "PrimaryWatcherFunction"):
        props = res[name]["Properties"]
        assert props["Events"]["EveryMinute"]["Properties"]["Schedule"] == "rate(1 minute)"
        assert props["Timeout"] < 60
    # The Region's own canary probes its execute-api URL; the watcher, the custom domain.
    assert ".execute-api." in res["CanaryFunction"]["Properties"]["Environment"]["Variables"]["TARGET_URL"]["Fn::Sub"]


def test_access_log_never_records_the_query_string(template):
    fmt = template["Resources"]["Stage"]["Properties"]["AccessLogSettings"]["Format"]
    assert "querystring" not in fmt.lower() and "token" not in fmt.lower()


def test_outputs_name_urls_tables_alarm_and_health_check(template):
    outputs = template["Outputs"]
    for key in ("ExecuteApiUrl", "CustomDomainUrl", "StateTableName", "ConnectionsTableName", "PrimaryHealthAlarmName", "PrimaryHealthCheckId", "ApiId", "RegionalDomainName", "RegionalHostedZoneId"):
        assert key in outputs, key


def test_regional_endpoint_is_optional_never_failed_over_and_always_output(template):
    res = template["Resources"]
    for name in ("RegionalDomain", "RegionalDomainMapping", "RegionalRecord"):
        assert res[name]["Condition"] == "HasRegionalName"
    record = res["RegionalRecord"]["Properties"]
    # A plain alias: client-assisted failover needs each Region reachable by its own name,
    # whatever the health check says.
    assert "Failover" not in record and "HealthCheckId" not in record
    assert record["AliasTarget"]["EvaluateTargetHealth"] is False
    assert res["RegionalDomain"]["Properties"]["DomainNameConfigurations"][0]["EndpointType"] == "REGIONAL"
    assert "RegionalEndpointUrl" in template["Outputs"]


def test_every_push_starts_from_each_regions_own_stream(template):
    import json

    fn = template["Resources"]["WsHandlerFunction"]["Properties"]
    assert "ReplicatedBids" not in fn["Events"]
    event = fn["Events"]["SummaryChanges"]
    assert event["Type"] == "DynamoDB"
    props = event["Properties"]
    # The primary takes its replica's stream from the table; the secondary from a parameter
    # that the deploy fills in and a rule requires.
    assert props["Stream"] == {
        "Fn::If": ["IsPrimary", {"Fn::GetAtt": ["StateTable", "StreamArn"]}, {"Ref": "StateTableStreamArn"}]
    }
    assert props["StartingPosition"] == "LATEST"
    # One pusher per stream shard: the conflation's spacing holds per auction.
    assert props["ParallelizationFactor"] == 1
    # The summaries, and (a conditional second filter) the fast failover's orders, which the
    # next test checks.
    (flt,) = [f for f in props["FilterCriteria"]["Filters"] if "Fn::If" not in f]
    pattern = json.loads(flt["Pattern"])
    # Every Region's summary and the ledger head: this Region's own bids are pushed from
    # here too (the bid's answer waits for no push), so nothing filters on the Region.
    assert pattern == {"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "SUMMARY#"}]}}}}
    env = fn["Environment"]["Variables"]
    for name, param in [
        ("PUSH_WINDOW_MS", "PushWindowMs"),
        ("PUSH_BUDGET_PER_SECOND", "PushBudgetPerSecond"),
        ("PUSH_WORKERS", "PushWorkers"),
        ("PUSH_PAGE_SIZE", "PushPageSize"),
    ]:
        assert env[name] == {"Ref": param}
    # The budget is a share of the account's 10,000 requests per second per Region.
    budget = template["Parameters"]["PushBudgetPerSecond"]
    assert budget["MaxValue"] <= 10000 and budget["Default"] < 10000
    rule = template["Rules"]["SecondaryNeedsThePrimary"]["Assertions"][0]["Assert"]["Fn::And"]
    assert any("StateTableStreamArn" in json.dumps(a) for a in rule)
    # The bid transaction is authorised by its actions: PutItem on the state table.
    state = next(s for s in _statements(template["Resources"]["WsHandlerFunction"]) if s["Sid"] == "StateTable")
    assert "dynamodb:PutItem" in state["Action"]


def test_every_function_logs_to_a_stack_owned_group_with_retention(template):
    groups = resources(template, "AWS::Logs::LogGroup")
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        ref = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert ref in groups, f"{name} logs to {ref}, not a group of this stack"
        assert groups[ref]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, ref
        assert groups[ref].get("Condition") == fn.get("Condition"), f"{ref} exists exactly when {name} does"
    for name, group in groups.items():
        assert "RetentionInDays" in group["Properties"], f"{name} keeps logs forever"


def test_no_secret_is_resolved_into_any_environment_and_each_is_read_by_name(template):
    assert "CanarySecretArn" not in template["Parameters"], "an ARN names one Region; the secondary would read the primary's"
    for name in ("CanarySecretName", "UserHs256SecretName"):
        assert "arn:" not in template["Parameters"][name].get("AllowedPattern", ""), name
    text = (ROOT / "template.yaml").read_text()
    assert "{{resolve:" not in text, "a dynamic reference puts the secret in plain text in the function's configuration"
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        env = fn["Properties"]["Environment"]["Variables"]
        for var, value in env.items():
            if "SECRET" in var:
                assert var.endswith("_SECRET_ID"), f"{name}: {var} carries a secret, not its name"
                names = json.dumps(value)
                assert "CanarySecretName" in names or "UserHs256SecretName" in names, (name, var)


def test_api_gateway_account_logs_role_is_created_or_declared_existing(template):
    params = template["Parameters"]["ApiGatewayLogsRole"]
    assert params["AllowedValues"] == ["create", "existing"] and params["Default"] == "create"
    account = template["Resources"]["ApiGatewayAccount"]
    assert account["Type"] == "AWS::ApiGateway::Account"
    assert account["Condition"] == "CreateApiGatewayLogsRole"
    assert account["DependsOn"] == "WebSocketApi", "a first API Gateway resource must exist before the account setting"
    assert account["Properties"]["CloudWatchRoleArn"] == {"Fn::GetAtt": ["ApiGatewayLogsRoleResource", "Arn"]}
    role = template["Resources"]["ApiGatewayLogsRoleResource"]["Properties"]
    assert role["ManagedPolicyArns"] == [{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"}]
    # The stage (which has access logs) depends on the setting when this stack makes it.
    description = template["Resources"]["Stage"]["Properties"]["Description"]["Fn::If"]
    assert description[0] == "CreateApiGatewayLogsRole" and "${ApiGatewayAccount}" in description[1]["Fn::Sub"]


def test_stage_auto_deploys_after_routes_responses_and_authorizer(template):
    assert not resources(template, "AWS::ApiGatewayV2::Deployment"), "an explicit Deployment never changes on update"
    stage = template["Resources"]["Stage"]
    assert stage["Properties"]["AutoDeploy"] is True
    assert "DeploymentId" not in stage["Properties"]
    needed = set(resources(template, "AWS::ApiGatewayV2::Route")) | set(resources(template, "AWS::ApiGatewayV2::RouteResponse"))
    needed |= {"Authorizer", "HandlerIntegration"}
    assert needed <= set(stage["DependsOn"]), needed - set(stage["DependsOn"])


def test_connect_is_throttled_and_authorizer_concurrency_optional(template):
    settings = template["Resources"]["Stage"]["Properties"]["RouteSettings"]["$connect"]
    assert settings["ThrottlingRateLimit"] == {"Ref": "ConnectRateLimit"}
    assert settings["ThrottlingBurstLimit"] == {"Ref": "ConnectRateLimit"}
    reserved = template["Resources"]["AuthorizerFunction"]["Properties"]["ReservedConcurrentExecutions"]["Fn::If"]
    assert reserved[0] == "ReservesAuthorizerConcurrency"
    assert template["Parameters"]["AuthorizerReservedConcurrency"]["Default"] == -1, "a new account (quota 10) cannot reserve"


def test_scheduled_canaries_are_never_retried(template):
    for name in ("CanaryFunction", "PrimaryWatcherFunction"):
        props = template["Resources"][name]["Properties"]
        assert props["EventInvokeConfig"]["MaximumRetryAttempts"] == 0, name
        schedule = props["Events"]["EveryMinute"]["Properties"]
        assert schedule["RetryPolicy"]["MaximumRetryAttempts"] == 0, name


def test_health_alarms_notify_an_optional_topic(template):
    for name in ("RegionHealthAlarm", "PrimaryHealthAlarm"):
        props = template["Resources"][name]["Properties"]
        for key in ("AlarmActions", "OKActions"):
            assert props[key]["Fn::If"][0] == "HasAlarmTopic", (name, key)
            assert props[key]["Fn::If"][1] == [{"Ref": "AlarmTopicArn"}], (name, key)


def test_handler_invoke_permission_is_scoped_to_the_stage(template):
    arn = template["Resources"]["HandlerInvokePermission"]["Properties"]["SourceArn"]["Fn::Sub"]
    assert arn.endswith("${WebSocketApi}/${StageName}/*"), arn


def test_canary_run_fits_its_timeout_for_every_allowed_setting(template):
    p = template["Parameters"]
    probes, spacing, timeout = (p[k]["MaxValue"] for k in ("ProbesPerRun", "ProbeSpacingSeconds", "ProbeTimeoutSeconds"))
    worst = probes * timeout + (probes - 1) * spacing
    for name in ("CanaryFunction", "PrimaryWatcherFunction"):
        limit = template["Resources"][name]["Properties"]["Timeout"]
        assert worst + 5 <= limit, f"{name}: {worst} s of probes in a {limit} s timeout"


def _rule_allows(rule, values):
    """Evaluate a Rules assertion (Equals/Not/And/Or over Refs) for parameter values."""
    def ev(node):
        if isinstance(node, dict):
            ((fn, arg),) = node.items()
            if fn == "Ref":
                return str(values[arg])
            if fn == "Fn::Equals":
                return ev(arg[0]) == ev(arg[1])
            if fn == "Fn::Not":
                return not ev(arg[0])
            if fn == "Fn::And":
                return all(ev(a) for a in arg)
            if fn == "Fn::Or":
                return any(ev(a) for a in arg)
            raise AssertionError(fn)
        return str(node)
    if "RuleCondition" in rule and not ev(rule["RuleCondition"]):
        return True
    return all(ev(a["Assert"]) for a in rule["Assertions"])


def _defaults(template):
    return {k: v.get("Default", "x") for k, v in template["Parameters"].items()}


def test_every_allowed_alarm_setting_is_valid_together(template):
    rule = template["Rules"]["AlarmWindowHoldsTheFailover"]
    windows = template["Mappings"]["FailbackWindow"]
    p = template["Parameters"]
    for m in range(p["FailoverDatapoints"]["MinValue"], p["FailoverDatapoints"]["MaxValue"] + 1):
        for k in p["FailbackHealthyDatapoints"]["AllowedValues"]:
            values = {**_defaults(template), "FailoverDatapoints": m, "FailbackHealthyDatapoints": k}
            valid = m <= windows[k]["EvaluationPeriods"]
            assert _rule_allows(rule, values) == valid, (m, k)


def test_user_tokens_need_a_jwks_or_an_hs256_key(template):
    rule = template["Rules"]["UserTokensCanBeVerified"]
    base = _defaults(template)
    assert _rule_allows(rule, {**base, "JwtJwksUrl": "https://idp.example/jwks"})
    assert not _rule_allows(rule, {**base, "JwtJwksUrl": ""}), "no JWKS, no key: every $connect would fail"
    assert not _rule_allows(rule, {**base, "JwtJwksUrl": "", "UserHs256SecretName": "users"}), "RS256 allowed without a JWKS"
    assert _rule_allows(rule, {**base, "JwtJwksUrl": "", "JwtAlgorithms": "HS256", "UserHs256SecretName": "users"})


@pytest.mark.parametrize("side", ["Primary", "Secondary"])
def test_verdict_and_region_switch_together_need_both_healthy(template, side):
    """Route 53 cannot nest calculated checks: with a Region switch plan the PRIMARY record
    reads the watcher's view and the plan's (docs/DEPLOY.md states what that mode gives up)."""
    check = template["Resources"][f"{side}CombinedHealthCheck"]
    assert check["Condition"] == "AlarmAndRegionSwitch"
    config = check["Properties"]["HealthCheckConfig"]
    assert config["Type"] == "CALCULATED"
    first = {"Primary": {"Ref": "PrimaryVerdictCheck"}, "Secondary": {"Ref": "SecondaryHealthCheck"}}[side]
    assert config["ChildHealthChecks"] == [first, {"Ref": f"RegionSwitch{side}HealthCheckId"}]
    assert config["HealthThreshold"] == 2, "either child going unhealthy takes the Region out"
    for child in config["ChildHealthChecks"]:
        if "Ref" in child and child["Ref"] in template["Resources"]:
            kind = template["Resources"][child["Ref"]]["Properties"]["HealthCheckConfig"]
            assert json.dumps(kind).count("CALCULATED") == 0, "a calculated check cannot be a child"


def test_failover_control_defaults_to_the_alarm_and_needs_the_plans_checks_otherwise(template):
    params = template["Parameters"]
    assert params["FailoverControl"]["Default"] == "alarm"
    assert set(params["FailoverControl"]["AllowedValues"]) == {"alarm", "region-switch", "alarm-and-region-switch"}
    rule = template["Rules"]["RegionSwitchNeedsItsHealthChecks"]
    assert rule["RuleCondition"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "FailoverControl"}, "alarm"]}]}
    asserted = json.dumps(rule["Assertions"])
    assert "RegionSwitchPrimaryHealthCheckId" in asserted and "RegionSwitchSecondaryHealthCheckId" in asserted


@pytest.fixture(scope="module")
def region_switch():
    tpl, matches = decode(str(ROOT / "arc" / "region-switch.yaml"))
    assert not matches, matches
    return tpl


def test_region_switch_plan_activates_either_region_through_the_failover_records(template, region_switch):
    plan = region_switch["Resources"]["Plan"]["Properties"]
    assert plan["RecoveryApproach"] == "activePassive"
    assert plan["Regions"] == [{"Ref": "PrimaryRegion"}, {"Ref": "SecondaryRegion"}]
    targets = {w["WorkflowTargetRegion"]["Ref"]: w for w in plan["Workflows"]}
    assert set(targets) == {"PrimaryRegion", "SecondaryRegion"}
    # The set identifiers the plan maps to Regions are the ones the wsdr records carry.
    identifiers = {
        r["Properties"]["Failover"]: r["Properties"]["SetIdentifier"]
        for r in resources(template, "AWS::Route53::RecordSet").values()
        if "Failover" in r["Properties"]
    }
    assert identifiers == {"PRIMARY": {"Fn::Sub": "primary-${PrimaryRegion}"}, "SECONDARY": {"Fn::Sub": "secondary-${AWS::Region}"}}
    for workflow in targets.values():
        assert workflow["WorkflowTargetAction"] == "activate"
        dns = workflow["Steps"][0]
        assert dns["ExecutionBlockType"] == "Route53HealthCheck"
        config = dns["ExecutionBlockConfiguration"]["Route53HealthCheckConfig"]
        assert config["RecordName"] == {"Ref": "DomainName"}
        # The secondary stack runs in SecondaryRegion, so its ${AWS::Region} is that Region.
        assert config["RecordSets"] == [
            {"RecordSetIdentifier": {"Fn::Sub": "primary-${PrimaryRegion}"}, "Region": {"Ref": "PrimaryRegion"}},
            {"RecordSetIdentifier": {"Fn::Sub": "secondary-${SecondaryRegion}"}, "Region": {"Ref": "SecondaryRegion"}},
        ]
        assert workflow["Steps"][1]["Fn::If"][0] == "HasCustomAction"
    assert targets["PrimaryRegion"]["Steps"] == targets["SecondaryRegion"]["Steps"]


def test_region_switch_role_is_assumed_by_region_switch_and_reads_only_the_zone(region_switch):
    role = region_switch["Resources"]["PlanExecutionRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "arc-region-switch.amazonaws.com"}
    (policy,) = role["Policies"]
    read, invoke = policy["PolicyDocument"]["Statement"]
    assert read["Action"] == "route53:ListResourceRecordSets"
    assert "hostedzone/${HostedZoneId}" in read["Resource"]["Fn::Sub"]
    assert invoke["Fn::If"][0] == "HasCustomAction"
    assert invoke["Fn::If"][1]["Resource"] == {"Ref": "CustomActionFunctionArn"}


def test_the_herd_hint_is_on_by_default_from_a_census_every_minute(template):
    params = template["Parameters"]
    assert params["HerdHint"]["Default"] == "on"
    assert params["NewConnectionQuotaPerSecond"]["Default"] == 500
    res = template["Resources"]
    # The census runs only in the stack's own evacuator (it counts its own Region) ...
    primary_events = res["PrimaryEvacuatorFunction"]["Properties"].get("Events", {})
    assert all(
        "census" not in e["Properties"].get("Input", "") for e in primary_events.values()
    ), "the primary counts itself"
    census = res["EvacuatorFunction"]["Properties"]["Events"]["Census"]
    assert census["Type"] == "Schedule"
    assert census["Properties"]["Schedule"] == "rate(1 minute)"
    assert json.loads(census["Properties"]["Input"]) == {"census": True}
    assert census["Properties"]["State"] == {"Fn::If": ["HerdHintOn", "ENABLED", "DISABLED"]}
    # ... and the handler advertises it against the quota, or not at all.
    handler = res["WsHandlerFunction"]["Properties"]
    assert handler["Environment"]["Variables"]["HERD_HINT_QUOTA_PER_SECOND"] == {"Fn::If": ["HerdHintOn", {"Ref": "NewConnectionQuotaPerSecond"}, "0"]}
    connections = next(st for st in handler["Policies"][0]["Statement"] if st["Sid"] == "ConnectionsTable")
    assert "dynamodb:GetItem" in connections["Action"], "the handler reads the census item"


def test_each_view_is_decided_alone_and_served_where_it_was_written(template):
    res = template["Resources"]
    assert template["Parameters"]["HealthCheckType"]["Default"] == "endpoint"
    health = res["HealthFunction"]
    assert health["Condition"] == "EndpointChecks", "in both Regions"
    # Route 53's checkers cannot sign: NONE, and SAM grants both actions (test_transform.py).
    assert health["Properties"]["FunctionUrlConfig"] == {"AuthType": "NONE"}
    (read,) = _statements(health)
    assert read["Action"] == "dynamodb:GetItem", "one item read per request, nothing else"
    env = health["Properties"]["Environment"]["Variables"]
    assert env["API_ID"] == {"Ref": "WebSocketApi"}
    assert env["PRIMARY_API_ID"] == {"Fn::If": ["IsSecondary", {"Ref": "PrimaryApiId"}, "none"]}
    source = (ROOT / "crates" / "core" / "src" / "verdict.rs").read_text()
    assert '"/self"' in source and '"/primary"' in source
    own = res["CanaryFunction"]["Properties"]["Environment"]["Variables"]
    watcher = res["PrimaryWatcherFunction"]["Properties"]["Environment"]["Variables"]
    for env in (own, watcher):
        assert env["FAST_PROBE_INTERVAL_SECONDS"] == {"Fn::If": ["EndpointChecks", {"Ref": "FastProbeIntervalSeconds"}, "0"]}
        assert int(env["FAST_WINDOW_SECONDS"]) < 60, "one invocation's rounds end before the next one starts"
        assert env["FAST_DECIDES"] == "true", "each view decides alone"
        assert "FAST_DECIDE_WITH" not in env, "no view waits for another's rounds by replication"
    assert own["FAST_VANTAGE"] == "inside" and watcher["FAST_VANTAGE"] == "outside"
    for name in ("CanaryFunction", "PrimaryWatcherFunction"):
        assert int(res[name]["Properties"]["Timeout"]) > int(watcher["FAST_WINDOW_SECONDS"]), name
    # The host Route 53 polls for each Region's own view is an output: the secondary takes the
    # primary's as PrimaryHealthUrlHost.
    assert template["Outputs"]["HealthUrlHost"]["Condition"] == "EndpointChecks"


def test_the_decision_path_has_reserved_concurrency(template):
    """What the decision reads is never throttled by the herd in its Region: each Region's
    health function and canary, the watcher, the evacuator and the push workers reserve
    concurrency (the workers and the evacuator at least their SQS mappings' maximum
    concurrency: AWS's rule, or Lambda may throttle the messages)."""
    res = template["Resources"]
    param = template["Parameters"]["DecisionPathReservedConcurrency"]
    assert param["Default"] > 0 and param["MinValue"] == 0
    assert template["Conditions"]["ReservesDecisionConcurrency"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DecisionPathReservedConcurrency"}, 0]}]}
    health = res["HealthFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert health == {"Fn::If": ["ReservesDecisionConcurrency", {"Ref": "DecisionPathReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    for name in ("PrimaryWatcherFunction", "CanaryFunction"):
        reserved = res[name]["Properties"]["ReservedConcurrentExecutions"]
        assert reserved["Fn::If"][0] == "ReservesDecisionConcurrency", name
        assert reserved["Fn::If"][1] >= 2, f"{name}: a run and the next may overlap"
    workers = res["PushWorkerFunction"]["Properties"]
    assert workers["ReservedConcurrentExecutions"] == workers["Events"]["PushJobs"]["Properties"]["ScalingConfig"]["MaximumConcurrency"]
    evacuator = res["PrimaryEvacuatorFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert evacuator >= res["FastFailoverEvacuation"]["Properties"]["ScalingConfig"]["MaximumConcurrency"]
    # make deploy-* checks the account's concurrency before deploying, counting all of it.
    makefile = (ROOT / "Makefile").read_text()
    assert "check-concurrency" in makefile and "get-account-settings" in (ROOT / "scripts" / "check-concurrency.sh").read_text()
    assert "PUSH_WORKERS" in makefile, "the workers' reservation is counted"


def test_the_verdict_alarm_evacuates_the_primary_after_waiting_for_dns(template):
    res = template["Resources"]
    rule = res["EvacuateOnFailoverRule"]
    assert rule["Condition"] == "EvacuatesOnFailover"
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.cloudwatch"]
    assert pattern["resources"] == [{"Fn::GetAtt": ["PrimaryHealthAlarm", "Arn"]}]
    assert pattern["detail"]["state"]["value"] == ["ALARM"], "only the failover decision, never its clearing"
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["PrimaryEvacuatorFunction", "Arn"]}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    body = target["Input"]["Fn::Sub"]
    # The input is an evacuation request the evacuator accepts (deny_unknown_fields).
    body, values = body
    assert values["Wait"] == {"Fn::If": ["AutoEvacuateWait", "120", {"Ref": "EvacuateWaitSeconds"}]}
    sample = json.loads(body.replace("${AWS::Region}", "us-west-2").replace("${Wait}", "120"))
    assert set(sample) == {"to", "reason", "waitSeconds"}
    source = (ROOT / "crates" / "evacuator" / "src" / "lib.rs").read_text()
    assert "wait_seconds" in source and "deny_unknown_fields" in source
    pattern = re.compile(template["Parameters"]["EvacuateWaitSeconds"]["AllowedPattern"])
    assert pattern.match("auto") and pattern.match("0") and pattern.match("240")
    assert not pattern.match("241") and not pattern.match("999"), "the evacuator refuses longer waits"
    permission = res["EvacuateOnFailoverPermission"]["Properties"]
    assert permission["Principal"] == "events.amazonaws.com"
    assert permission["SourceArn"] == {"Fn::GetAtt": ["EvacuateOnFailoverRule", "Arn"]}
    condition = template["Conditions"]["EvacuatesOnFailover"]["Fn::And"]
    assert {"Condition": "EvacuatesPrimary"} in condition
    assert {"Fn::Not": [{"Condition": "RegionSwitchOnly"}]} in condition, "with a Region switch plan DNS follows the plan"
    assert {"Fn::Not": [{"Condition": "EndpointChecks"}]} in condition, "with endpoint checks the fast verdict triggers it"


def test_a_fast_failover_evacuates_through_the_handlers_stream_reader_and_a_queue(template):
    res = template["Resources"]
    # The handler's SummaryChanges mapping, the stream's one reader, passes the judge's
    # change on the primary to "fail over" (in the secondary with fast failovers) ...
    handler = res["WsHandlerFunction"]["Properties"]
    mapping = handler["Events"]["SummaryChanges"]["Properties"]
    filters = mapping["FilterCriteria"]["Filters"]
    (conditional,) = [f for f in filters if "Fn::If" in f]
    condition, health, otherwise = conditional["Fn::If"]
    assert condition == "EvacuatesOnFastFailover" and otherwise == {"Ref": "AWS::NoValue"}
    pattern = json.loads(health["Pattern"]["Fn::Sub"].replace("${PrimaryApiId}", "abc"))
    assert pattern["dynamodb"]["Keys"] == {"pk": {"S": ["JUDGE#abc"]}, "sk": {"S": ["CHANGE"]}}
    assert pattern["dynamodb"]["NewImage"] == {"serve": {"BOOL": [False]}}
    # A batch that fails after its retries is recorded, never dropped.
    assert mapping["MaximumRetryAttempts"] == 2
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["StreamFailures", "Arn"]}
    # ... and forwards it to FastFailovers (one decoding: wsdr_aws::change_records) ...
    env = handler["Environment"]["Variables"]
    assert env["FAST_FAILOVER_QUEUE_URL"] == {"Fn::If": ["EvacuatesOnFastFailover", {"Ref": "FastFailovers"}, {"Ref": "AWS::NoValue"}]}
    assert "failover_orders" in (ROOT / "crates" / "ws-handler" / "src" / "stream.rs").read_text()
    sends = [st["Fn::If"][1] for st in handler["Policies"][0]["Statement"] if "Fn::If" in st]
    assert {"Sid": "ForwardFastFailovers", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": ["FastFailovers", "Arn"]}} in sends
    # ... which the evacuator reads: a failed or throttled order comes back (visibility) before
    # it expires (retention), once, then reaches the dead-letter queue; a second delivery of
    # one order is a no-op (its id, ORDERS_TABLE).
    queue = res["FastFailovers"]
    assert queue["Condition"] == "EvacuatesOnFastFailover"
    props = queue["Properties"]
    receives = props["RedrivePolicy"]["maxReceiveCount"]
    assert receives == 2
    assert props["VisibilityTimeout"] >= 6 * res["PrimaryEvacuatorFunction"]["Properties"]["Timeout"]
    assert props["MessageRetentionPeriod"] > receives * props["VisibilityTimeout"], "a failed order reaches the dead-letter queue"
    mapping = res["FastFailoverEvacuation"]
    assert mapping["Condition"] == "EvacuatesOnFastFailover"
    props = mapping["Properties"]
    assert props["FunctionName"] == {"Ref": "PrimaryEvacuatorFunction"}
    assert props["EventSourceArn"] == {"Fn::GetAtt": ["FastFailovers", "Arn"]}
    assert props["BatchSize"] == 1
    env = res["PrimaryEvacuatorFunction"]["Properties"]["Environment"]["Variables"]
    assert env["FAILOVER_TO"] == {"Ref": "AWS::Region"}
    assert env["FAILOVER_WAIT_SECONDS"] == {"Fn::If": ["AutoEvacuateWait", {"Fn::If": ["EndpointChecks", "120", "240"]}, {"Ref": "EvacuateWaitSeconds"}]}
    assert env["FAILOVER_ENDPOINT"] == template["Outputs"]["RegionalEndpointUrl"]["Value"]
    # Re-checked before each phase, run once (crates/evacuator: order.rs, recheck.rs).
    assert env["STATE_TABLE"] == {"Ref": "StateTableName"} and env["PRIMARY_API_ID"] == {"Ref": "PrimaryApiId"}
    assert env["PRIMARY_SELF_URL"] == {"Fn::If": ["EndpointChecks", {"Fn::Sub": "https://${PrimaryHealthUrlHost}/self"}, "none"]}
    assert env["GLOBAL_NAME"] == {"Ref": "DomainName"}
    assert env["DESTINATION_NAME"] == {"Fn::GetAtt": ["CustomDomain", "RegionalDomainName"]}
    assert env["ORDERS_TABLE"] == {"Ref": "ConnectionsTable"}
    condition = template["Conditions"]["EvacuatesOnFastFailover"]["Fn::And"]
    assert {"Condition": "EndpointChecks"} in condition and {"Condition": "EvacuatesPrimary"} in condition
    for alarm in ("FastFailoversAgeAlarm", "FastFailoversDeadLettersAlarm"):
        assert res[alarm]["Condition"] == "EvacuatesOnFastFailover", alarm


def test_the_global_tables_stream_has_one_reader(template):
    """AWS, on Global Tables and streams: "limit the number of simultaneous functions to one to
    avoid request throttling". One event source on the state table's stream, whatever the
    conditions: the handler's SummaryChanges."""
    res = template["Resources"]
    readers = []
    for name, resource in res.items():
        props = resource.get("Properties", {})
        source = json.dumps(props.get("EventSourceArn", ""))
        if resource["Type"] == "AWS::Lambda::EventSourceMapping" and ("StreamArn" in source or "StateTable" in source):
            readers.append(name)
        for event_name, event in props.get("Events", {}).items():
            if event.get("Type") in ("DynamoDB", "Kinesis"):
                readers.append(f"{name}.{event_name}")
    assert sorted(set(readers)) == ["WsHandlerFunction.SummaryChanges"], readers


def test_evacuators_aim_at_one_regions_table_and_api_and_may_do_nothing_else(template):
    res = template["Resources"]
    own = res["EvacuatorFunction"]
    assert "Condition" not in own, "every stack can empty its own Region"
    env = own["Properties"]["Environment"]["Variables"]
    assert env["TARGET_REGION"] == {"Ref": "AWS::Region"}
    assert env["TARGET_CONNECTIONS_TABLE"] == {"Ref": "ConnectionsTable"}
    assert "${WebSocketApi}.execute-api.${AWS::Region}" in env["TARGET_CALLBACK_URL"]["Fn::Sub"]
    primary = res["PrimaryEvacuatorFunction"]
    assert primary["Condition"] == "EvacuatesPrimary"
    env = primary["Properties"]["Environment"]["Variables"]
    assert env["TARGET_REGION"] == {"Ref": "PrimaryRegion"}
    assert env["TARGET_CONNECTIONS_TABLE"] == {"Ref": "PrimaryConnectionsTableName"}
    assert "${PrimaryApiId}.execute-api.${PrimaryRegion}" in env["TARGET_CALLBACK_URL"]["Fn::Sub"]
    for name in ("EvacuatorFunction", "PrimaryEvacuatorFunction"):
        props = res[name]["Properties"]
        assert props["EventInvokeConfig"]["MaximumRetryAttempts"] == 0, name
        assert props["Environment"]["Variables"]["DESTINATION_QUOTA_PER_SECOND"] == {"Ref": "NewConnectionQuotaPerSecond"}, name
        statements = [st for st in props["Policies"][0]["Statement"] if "Fn::If" not in st]
        actions = sorted(a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"]))
        expected = ["dynamodb:BatchWriteItem", "dynamodb:Query", "dynamodb:Scan", "execute-api:ManageConnections"]
        if name == "EvacuatorFunction":
            expected = sorted(expected + ["dynamodb:PutItem"])
        else:
            # The re-check's one read and the order log's one write, each scoped by key.
            expected = sorted(expected + ["dynamodb:GetItem", "dynamodb:PutItem"])
            read = next(st for st in statements if st.get("Sid") == "ReadJudgeVerdict")
            assert read["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [{"Fn::Sub": "JUDGE#${PrimaryApiId}"}]}}
            orders = next(st for st in statements if st.get("Sid") == "RecordOrders")
            assert orders["Resource"] == {"Fn::GetAtt": ["ConnectionsTable", "Arn"]}
            assert orders["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["#order#*"]}}
        assert actions == expected, name
        post = next(st for st in statements if st["Action"] == "execute-api:ManageConnections")
        assert post["Resource"]["Fn::Sub"].endswith("/POST/@connections/*"), name
    assert template["Conditions"]["EvacuatesPrimary"] == {
        "Fn::And": [{"Condition": "IsSecondary"}, {"Fn::Not": [{"Fn::Equals": [{"Ref": "PrimaryConnectionsTableName"}, "none"]}]}]
    }


def test_strong_mode_is_one_parameter_with_its_third_member(template):
    params = template["Parameters"]
    assert params["Consistency"]["AllowedValues"] == ["eventual", "strong"]
    assert params["Consistency"]["Default"] == "eventual"
    assert params["ThirdRegionRole"]["AllowedValues"] == ["witness", "replica"]
    props = template["Resources"]["StateTable"]["Properties"]
    assert props["MultiRegionConsistency"] == {"Fn::If": ["IsStrong", "STRONG", {"Ref": "AWS::NoValue"}]}
    assert props["GlobalTableWitnesses"]["Fn::If"][0] == "StrongWithWitness"
    assert props["GlobalTableWitnesses"]["Fn::If"][1] == [{"Region": {"Ref": "ThirdRegion"}}]
    env = template["Resources"]["WsHandlerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["CONSISTENCY"] == {"Ref": "Consistency"}
    rule = template["Rules"]["StrongModeRegionsFormAnMrscSet"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "Consistency"}, "strong"]}
    assert "us-east-2" in json.dumps(rule)


@pytest.mark.parametrize("role", ["witness", "replica"])
def test_cfn_lint_passes_with_the_strong_mode_parameters_set(tmp_path, role):
    """cfn-lint resolves conditions from the parameters' defaults: a copy whose defaults are
    strong mode's is linted as a strong-mode deployment would be."""
    import subprocess
    import sys

    text = (ROOT / "template.yaml").read_text()
    text = text.replace(
        "  Consistency:\n    Type: String\n    Default: eventual",
        "  Consistency:\n    Type: String\n    Default: strong",
    )
    text = text.replace(
        "  ThirdRegionRole:\n    Type: String\n    Default: witness",
        f"  ThirdRegionRole:\n    Type: String\n    Default: {role}",
    )
    assert "Default: strong" in text
    strong = tmp_path / "template-strong.yaml"
    strong.write_text(text)
    lint = pathlib.Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run([str(lint), str(strong)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_failed_first_create_can_be_retried(template):
    """Only RetainExceptOnCreate deletes a resource when the create that made it rolls back:
    the state table, the logs role and the account setting must not block the retry."""
    res = template["Resources"]
    for name in ("StateTable", "ApiGatewayLogsRoleResource", "ApiGatewayAccount"):
        assert res[name]["DeletionPolicy"] == "RetainExceptOnCreate", name
        assert res[name]["UpdateReplacePolicy"] == "Retain", name
    # A protected table cannot be deleted by the rollback: the first create runs without.
    makefile = (ROOT / "Makefile").read_text()
    deploy = makefile[makefile.index("\ndeploy-primary:"):makefile.index("\ndeploy-secondary:")]
    assert "deploy false" in deploy and "describe-stacks" in deploy


def test_the_access_log_uses_websocket_variables_and_a_plain_group_arn(template):
    stage = template["Resources"]["Stage"]["Properties"]["AccessLogSettings"]
    assert "$context.integrationErrorMessage" not in stage["Format"], "not a WebSocket variable"
    assert "$context.integration.error" in stage["Format"]
    json.loads(stage["Format"])
    arn = stage["DestinationArn"]["Fn::Sub"]
    assert arn.endswith(":log-group:${AccessLogGroup}") and not arn.endswith(":*")


def test_each_verdict_has_one_writer_scoped_to_its_own_key(template):
    """Anyone who can write a verdict or the judge's change can order the primary's
    evacuation. Each writer's role is scoped to its own partition key: a Region's canary to
    HEALTH#<its api>, the watcher to JUDGE#<the primary's api>; the handler is denied every
    health, judge and rehearsal key; the health function only reads its own four."""
    res = template["Resources"]
    canary = next(s for s in _statements(res["CanaryFunction"]) if s.get("Sid") == "FastRoundRecords")
    assert canary["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [{"Fn::Sub": "HEALTH#${WebSocketApi}"}]}}
    watcher = next(s for s in _statements(res["PrimaryWatcherFunction"]) if s.get("Sid") == "FastRoundRecords")
    assert watcher["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [{"Fn::Sub": "JUDGE#${PrimaryApiId}"}]}}
    for st in (canary, watcher):
        assert "dynamodb:UpdateItem" not in st["Action"] and "dynamodb:DeleteItem" not in st["Action"]
    deny = next(s for s in _statements(res["WsHandlerFunction"]) if s.get("Sid") == "NeverHealthRecords")
    assert deny["Effect"] == "Deny"
    assert set(deny["Action"]) >= {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["HEALTH#*", "JUDGE#*", "REHEARSAL-*"]}}
    (read,) = _statements(res["HealthFunction"])
    keys = read["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
    assert [k["Fn::Sub"] for k in keys] == [
        "HEALTH#${WebSocketApi}", "REHEARSAL-SELF#${WebSocketApi}", "JUDGE#${PrimaryApiId}", "REHEARSAL-JUDGE#${PrimaryApiId}",
    ]
    # What the binaries write is under those prefixes (crates/core/src/verdict.rs).
    verdict = (ROOT / "crates" / "core" / "src" / "verdict.rs").read_text()
    for prefix in ('"HEALTH#"', '"JUDGE#"', '"REHEARSAL-SELF#"', '"REHEARSAL-JUDGE#"'):
        assert prefix in verdict, prefix
    # No other function may write the state table's health keys: only these three name them.
    writers = [
        name for name, fn in resources(template, "AWS::Serverless::Function").items()
        if any("HEALTH#" in json.dumps(st) or "JUDGE#" in json.dumps(st) for st in _statements(fn) if st.get("Effect") == "Allow" and "dynamodb:PutItem" in json.dumps(st))
    ]
    assert sorted(writers) == ["CanaryFunction", "PrimaryWatcherFunction"], writers


def test_every_log_group_keeps_logs_for_log_retention_days(template):
    """One retention setting for every log group the stack makes, the access log included."""
    groups = resources(template, "AWS::Logs::LogGroup")
    assert groups
    for name, group in groups.items():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name


def test_nothing_stands_between_the_checks_and_the_health_functions(template):
    """No cache on the verdicts' path: a CloudFront front kept a "serve" at its edges while the
    origin answered 503 "fail over" (stale on 5xx and on origin timeouts), walked random paths
    past its cache, and could not call a function URL granted InvokeFunctionUrl alone. The
    checks reach each health function's URL directly (docs/DEPLOY.md, "Why the checks go
    direct"); every verdict is a 200 whose body the check matches."""
    res = template["Resources"]
    kinds = {r["Type"] for r in res.values()}
    assert not any(k.startswith("AWS::CloudFront::") for k in kinds), kinds
    for name in ("HealthOriginAccessControl", "HealthCachePolicy", "HealthDistribution", "HealthDistributionInvokeUrl"):
        assert name not in res, name
    checks = {k: v for k, v in res.items() if v["Type"] == "AWS::Route53::HealthCheck"}
    for name, check in checks.items():
        text = json.dumps(check)
        assert "cloudfront" not in text.lower(), name
        assert '"Type": "HTTPS"' not in text, f"{name}: a status-only check would read a verdict from a status code"
    # The health function never answers a verdict with a 5xx (crates/health).
    source = (ROOT / "crates" / "health" / "src" / "lib.rs").read_text()
    assert "SERVICE_UNAVAILABLE" not in source and "(StatusCode::OK, answer.body())" in source




def test_the_primary_evacuator_sweeps_the_judges_last_change_every_minute(template):
    """An order is an accelerator; the sweep makes the move happen (crates/evacuator, sweep):
    every minute, the judge's last change on the primary, run as the order it is, so an order
    the stream or the queue lost still runs, once."""
    fn = template["Resources"]["PrimaryEvacuatorFunction"]["Properties"]
    sweep = fn["Events"]["Sweep"]
    assert sweep["Type"] == "Schedule"
    assert sweep["Properties"]["Schedule"] == "rate(1 minute)"
    assert json.loads(sweep["Properties"]["Input"]) == {"sweep": True}
    assert sweep["Properties"]["State"] == {"Fn::If": ["EvacuatesOnFastFailover", "ENABLED", "DISABLED"]}
    env = fn["Environment"]["Variables"]
    for needed in ("STATE_TABLE", "PRIMARY_API_ID", "ORDERS_TABLE", "FAILOVER_TO"):
        assert needed in env, needed
    # The change item is read under the judge's key, which the policy allows.
    (read,) = [s for s in fn["Policies"][0]["Statement"] if isinstance(s, dict) and s.get("Sid") == "ReadJudgeVerdict"]
    assert read["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] == [{"Fn::Sub": "JUDGE#${PrimaryApiId}"}]
    # DNS is given long enough to move (asked every 5 s; the move goes when it does).
    assert env["FAILOVER_WAIT_SECONDS"] == {
        "Fn::If": ["AutoEvacuateWait", {"Fn::If": ["EndpointChecks", "120", "240"]}, {"Ref": "EvacuateWaitSeconds"}]
    }


def test_the_rehearsal_pair_mirrors_the_real_records_on_a_test_name(template):
    """`make rehearse` moves a test name through the same checks as the real one: its PRIMARY
    record's check is the same calculated check over the same two string matches on the same
    health functions (the /rehearsal/* paths), its SECONDARY record carries the real SECONDARY
    check; nothing on the real name."""
    res = template["Resources"]
    assert template["Conditions"]["Rehearses"] == {
        "Fn::And": [{"Condition": "IsSecondary"}, {"Condition": "EndpointChecks"}, {"Fn::Equals": [{"Ref": "Rehearsal"}, "on"]}]
    }
    assert template["Parameters"]["Rehearsal"]["Default"] == "on"
    real = {
        "RehearsalVerdictCheck": res["PrimaryVerdictCheck"]["Properties"]["HealthCheckConfig"]["Fn::If"][1],
        "RehearsalSelfCheck": res["PrimarySelfCheck"]["Properties"]["HealthCheckConfig"]["Fn::If"][1],
    }
    for name, mirrored in real.items():
        config = res[name]["Properties"]["HealthCheckConfig"]
        assert res[name]["Condition"] == "Rehearses"
        path = config.pop("ResourcePath")
        assert path == "/rehearsal" + mirrored["ResourcePath"]
        assert config == {k: v for k, v in mirrored.items() if k != "ResourcePath"}, name
    calc = res["RehearsalPrimaryCheck"]["Properties"]["HealthCheckConfig"]
    real_calc = res["PrimaryHealthCheck"]["Properties"]["HealthCheckConfig"]
    assert calc["Type"] == real_calc["Type"] == "CALCULATED"
    assert calc["HealthThreshold"] == real_calc["HealthThreshold"]
    assert calc["ChildHealthChecks"] == [{"Ref": "RehearsalVerdictCheck"}, {"Ref": "RehearsalSelfCheck"}]
    primary, secondary = res["RehearsalPrimaryRecord"]["Properties"], res["RehearsalSecondaryRecord"]["Properties"]
    for record in (primary, secondary):
        assert record["Name"] == {"Fn::Sub": "rehearsal.${DomainName}"}
        assert record["TTL"] == {"Ref": "DnsTtl"}
    assert primary["HealthCheckId"] == {"Ref": "RehearsalPrimaryCheck"}
    assert primary["ResourceRecords"] == [{"Ref": "PrimaryRegionalDomainName"}]
    assert secondary["HealthCheckId"] == {"Ref": "SecondaryHealthCheck"}
    assert secondary["ResourceRecords"] == [{"Fn::GetAtt": ["CustomDomain", "RegionalDomainName"]}]
    # What `make rehearse` reads.
    for output in ("RehearsalName", "RehearsalVerdictCheckId", "RehearsalSelfCheckId"):
        assert template["Outputs"][output]["Condition"] == "Rehearses"
    # The health function reads the rehearsal verdicts, and nobody but the operator writes them.
    makefile = (ROOT / "Makefile").read_text()
    assert "rehearse --aws" in makefile
