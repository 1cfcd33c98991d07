"""The SAM transform's own output, offline (samtranslator, the library `sam` and CloudFormation
run): what reaches CloudFormation for each Role must keep the dependencies and settings the
template asks for."""

import copy
import json
import os

import pytest
from cfnlint.decode import decode
from samtranslator.translator.transform import transform

from test_template import ROOT

PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012"}


class NoManagedPolicies:
    """The transform asks IAM for managed policy ARNs only to expand names; none are used."""

    def load(self):
        return {}


def translated(role, region, extra=None):
    tpl, matches = decode(str(ROOT / "template.yaml"))
    assert not matches, matches
    tpl = copy.deepcopy(tpl)
    for resource in tpl["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            # `sam build` replaces CodeUri with the built artifact's S3 location.
            resource["Properties"]["CodeUri"] = "s3://bucket/bootstrap.zip"
    params = {
        "Role": role,
        "DomainName": "auction.example.com",
        "HostedZoneId": "Z123",
        "CertificateArn": f"arn:aws:acm:{region}:123456789012:certificate/x",
        "JwtIssuer": "https://idp.example",
        "JwtAudience": "app",
        "JwtJwksUrl": "https://idp.example/jwks",
        "CanarySecretName": "wsdr/canary",
        **(extra or {}),
        "AWS::Region": region,
        "AWS::StackName": f"wsdr-{role}",
        **PSEUDO,
    }
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    return json.loads(json.dumps(transform(tpl, params, NoManagedPolicies())))


@pytest.fixture(scope="module", params=[("primary", "us-east-1"), ("secondary", "us-west-2")], ids=["primary", "secondary"])
def output(request):
    return translated(*request.param)


def of_type(out, kind):
    return {k: v for k, v in out["Resources"].items() if v["Type"] == kind}


def test_stage_still_waits_for_routes_responses_and_authorizer(output):
    stage = output["Resources"]["Stage"]
    needed = set(of_type(output, "AWS::ApiGatewayV2::Route")) | set(of_type(output, "AWS::ApiGatewayV2::RouteResponse"))
    needed |= {"Authorizer", "HandlerIntegration"}
    assert needed <= set(stage["DependsOn"])
    assert stage["Properties"]["AutoDeploy"] is True
    assert not of_type(output, "AWS::ApiGatewayV2::Deployment")


def test_each_lambda_logs_to_its_retained_group(output):
    groups = of_type(output, "AWS::Logs::LogGroup")
    for name, fn in of_type(output, "AWS::Lambda::Function").items():
        ref = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert ref in groups and "RetentionInDays" in groups[ref]["Properties"], name


def test_scheduled_canaries_have_no_retries_anywhere(output):
    configs = of_type(output, "AWS::Lambda::EventInvokeConfig")
    rules = of_type(output, "AWS::Events::Rule")
    assert configs and rules
    for name, config in configs.items():
        assert config["Properties"]["MaximumRetryAttempts"] == 0, name
    for name, rule in rules.items():
        for target in rule["Properties"]["Targets"]:
            assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0, name


def test_replicated_bids_stream_mapping_has_its_read_permissions(output):
    (mapping,) = [
        m for m in of_type(output, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": "WsHandlerFunction"}
    ]
    role = output["Resources"]["WsHandlerFunctionRole"]["Properties"]
    arns = json.dumps(role.get("ManagedPolicyArns", []))
    assert "AWSLambdaDynamoDBExecutionRole" in arns, "the stream's GetRecords/GetShardIterator/DescribeStream/ListStreams"


def test_functions_keep_the_globals(output):
    for name, fn in of_type(output, "AWS::Lambda::Function").items():
        props = fn["Properties"]
        assert props["Runtime"] == "provided.al2023", name
        assert props["Architectures"] == ["arm64"], name
        assert props["TracingConfig"] == {"Mode": "Active"}, name


def resolved(out, params):
    """What CloudFormation makes of the transform's output for these parameters: conditions
    evaluated, `Fn::If` chosen, `AWS::NoValue` dropped, parameter `Ref`s replaced (the
    transform leaves all of that to CloudFormation)."""
    values = {k: v.get("Default") for k, v in out["Parameters"].items()}
    values.update(params)
    no_value = object()

    def condition(expr):
        if isinstance(expr, dict):
            (fn, args), = expr.items()
            if fn == "Condition":
                return condition(out["Conditions"][args])
            if fn == "Fn::Equals":
                return value(args[0]) == value(args[1])
            if fn == "Fn::Not":
                return not condition(args[0])
            if fn == "Fn::And":
                return all(condition(a) for a in args)
            if fn == "Fn::Or":
                return any(condition(a) for a in args)
        raise AssertionError(f"unexpected condition {expr}")

    def value(v):
        if isinstance(v, dict) and len(v) == 1:
            (fn, args), = v.items()
            if fn == "Ref" and args == "AWS::NoValue":
                return no_value
            if fn == "Ref" and args in values:
                return values[args]
            if fn == "Fn::If":
                return value(args[1] if condition(out["Conditions"][args[0]]) else args[2])
        if isinstance(v, dict):
            kept = {k: value(x) for k, x in v.items()}
            return {k: x for k, x in kept.items() if x is not no_value}
        if isinstance(v, list):
            return [x for x in (value(x) for x in v) if x is not no_value]
        return v

    return value(out["Resources"])


@pytest.mark.parametrize("third", ["witness", "replica"])
def test_strong_mode_creates_an_mrsc_table_with_its_third_member(third):
    params = {"Role": "primary", "Consistency": "strong", "ThirdRegionRole": third}
    out = translated("primary", "us-east-1", params)
    resources = resolved(out, params)
    table = resources["StateTable"]["Properties"]
    assert table["MultiRegionConsistency"] == "STRONG"
    regions = [r["Region"] for r in table["Replicas"]]
    if third == "witness":
        assert table["GlobalTableWitnesses"] == [{"Region": "us-east-2"}]
        assert regions == ["us-east-1", "us-west-2"]
    else:
        assert "GlobalTableWitnesses" not in table
        assert regions == ["us-east-1", "us-west-2", "us-east-2"]
    handler = resources["WsHandlerFunction"]["Properties"]["Environment"]["Variables"]
    assert handler["CONSISTENCY"] == "strong"


def test_eventual_mode_table_is_unchanged_by_the_strong_mode_parameters():
    params = {"Role": "primary"}
    table = resolved(translated("primary", "us-east-1", params), params)["StateTable"]["Properties"]
    assert "MultiRegionConsistency" not in table
    assert "GlobalTableWitnesses" not in table
    assert [r["Region"] for r in table["Replicas"]] == ["us-east-1", "us-west-2"]


@pytest.mark.parametrize("role,region", [("primary", "us-east-1"), ("secondary", "us-west-2")])
def test_each_regions_health_function_url_answers_route_53s_checkers(role, region):
    """What reaches CloudFormation for each Region's health function: a function URL with
    AuthType NONE (Route 53's checkers cannot sign) whose resource policy grants "*" both
    lambda:InvokeFunctionUrl and lambda:InvokeFunction: "Starting in October 2025, new
    function URLs will require both lambda:InvokeFunctionUrl and lambda:InvokeFunction
    permissions" (Lambda, "Control access to Lambda function URLs"). With only the first,
    every request is refused and no check can ever be healthy. Reserved concurrency from the
    parameter; no CloudFront resource anywhere."""
    out = translated(role, region)
    health = out["Resources"]["HealthFunction"]
    assert health["Type"] == "AWS::Lambda::Function" and health["Condition"] == "EndpointChecks"
    assert health["Properties"]["ReservedConcurrentExecutions"] == {
        "Fn::If": ["ReservesDecisionConcurrency", {"Ref": "DecisionPathReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    urls = of_type(out, "AWS::Lambda::Url")
    (url,) = [u for u in urls.values() if u["Properties"]["TargetFunctionArn"] == {"Ref": "HealthFunction"}]
    assert url["Properties"]["AuthType"] == "NONE" and url["Condition"] == "EndpointChecks"
    permissions = [
        p["Properties"] for p in of_type(out, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Ref": "HealthFunction"}
    ]
    granted = {p["Action"] for p in permissions if p["Principal"] == "*"}
    assert granted == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}, permissions
    url_only = [p for p in permissions if p["Action"] == "lambda:InvokeFunctionUrl"]
    assert all(p.get("FunctionUrlAuthType") == "NONE" for p in url_only)
    invoke = [p for p in permissions if p["Action"] == "lambda:InvokeFunction"]
    assert all(p.get("InvokedViaFunctionUrl") is True for p in invoke), "only through the URL"
    assert not [k for k in out["Resources"] if out["Resources"][k]["Type"].startswith("AWS::CloudFront::")]


@pytest.mark.parametrize("role,region", [("primary", "us-east-1"), ("secondary", "us-west-2")])
def test_every_function_url_grants_both_actions_its_callers_need(role, region):
    """Any function URL the stacks create (today the health functions') has both permissions
    for the principal that calls it."""
    out = translated(role, region)
    for name, url in of_type(out, "AWS::Lambda::Url").items():
        target = url["Properties"]["TargetFunctionArn"]
        grants = {}
        for p in of_type(out, "AWS::Lambda::Permission").values():
            if p["Properties"]["FunctionName"] == target:
                grants.setdefault(p["Properties"]["Principal"], set()).add(p["Properties"]["Action"])
        assert grants, f"{name}: nobody may call it"
        for principal, actions in grants.items():
            assert {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"} <= actions, (name, principal, actions)


BOUNDARY = "arn:aws:iam::123456789012:policy/wsdr-function-boundary"


@pytest.mark.parametrize("role,region", [("primary", "us-east-1"), ("secondary", "us-west-2")])
def test_every_role_the_stack_creates_carries_the_permissions_boundary(role, region):
    """What reaches CloudFormation: each function's role (SAM makes them from Globals) and the
    API Gateway logs role carry PermissionsBoundaryArn; the CI service role creates no wsdr
    role without it (ci/bootstrap.yaml)."""
    out = translated(role, region, {"PermissionsBoundaryArn": BOUNDARY})
    roles = of_type(out, "AWS::IAM::Role")
    assert len(roles) >= 5, sorted(roles)
    for name, resource in roles.items():
        boundary = resource["Properties"].get("PermissionsBoundary")
        if isinstance(boundary, dict) and "Fn::If" in boundary:
            condition, value, _ = boundary["Fn::If"]
            assert condition == "HasPermissionsBoundary" and value == {"Ref": "PermissionsBoundaryArn"}, name
        else:
            assert boundary == BOUNDARY, (name, boundary)
    # Without one (a deploy with your own credentials): no boundary at all.
    plain = translated(role, region)
    for name, resource in of_type(plain, "AWS::IAM::Role").items():
        boundary = resource["Properties"].get("PermissionsBoundary")
        assert boundary is None or "Fn::If" in boundary, (name, boundary)


# What the managed policies SAM attaches grant (AWS managed policies; the boundary must admit
# the actions a function uses of them, or the function fails at run time, not at deploy).
MANAGED_ACTIONS_USED = {
    "AWSLambdaBasicExecutionRole": {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"},
    "AWSXrayWriteOnlyAccess": {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                               "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries"},
    "AWSLambdaDynamoDBExecutionRole": {"dynamodb:DescribeStream", "dynamodb:GetRecords",
                                       "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
    "AWSLambdaSQSQueueExecutionRole": {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
}


@pytest.mark.parametrize("role,region", [("primary", "us-east-1"), ("secondary", "us-west-2")])
def test_the_boundary_admits_every_action_a_function_role_is_given(role, region):
    """A role's effective permissions are its policies within its boundary: an action a
    function's policy grants but the boundary (ci/bootstrap.yaml) does not would fail only
    when called, in the account. Every action of every function role, inline or from a
    managed policy SAM attaches, must be one the boundary allows."""
    from test_bootstrap import actions

    boot, matches = decode(str(ROOT / "ci" / "bootstrap.yaml"))
    assert not matches, matches
    allowed = {a for s in boot["Resources"]["FunctionBoundary"]["Properties"]["PolicyDocument"]["Statement"] for a in actions(s)}
    out = translated(role, region)
    missing = []
    for name, resource in of_type(out, "AWS::IAM::Role").items():
        if not name.endswith("FunctionRole"):
            continue
        props = resource["Properties"]
        granted = set()
        for policy in props.get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                if isinstance(statement, dict) and "Fn::If" in statement:
                    statement = statement["Fn::If"][1]
                if statement.get("Effect") == "Allow":
                    granted |= set(actions(statement))
        for arn in props.get("ManagedPolicyArns", []):
            policy = str(arn).rsplit("/", 1)[-1].rstrip("'}")
            assert policy in MANAGED_ACTIONS_USED, (name, arn)
            granted |= MANAGED_ACTIONS_USED[policy]
        missing += [(name, a) for a in sorted(granted) if a not in allowed]
    assert not missing, missing
