"""ci/bootstrap.yaml: the GitHub OIDC provider and the two roles the release workflow uses.
The deploy role GitHub assumes runs change sets on the wsdr stacks only; CloudFormation makes
the changes as the service role, scoped to wsdr's resources and one hosted zone."""

import pytest
from cfnlint.decode import decode

from test_template import ROOT


@pytest.fixture(scope="module")
def bootstrap():
    tpl, matches = decode(str(ROOT / "ci" / "bootstrap.yaml"))
    assert not matches, matches
    return tpl


def statements(role):
    return [s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]


def actions(statement):
    a = statement["Action"]
    return a if isinstance(a, list) else [a]


def test_only_the_repositorys_deploy_environment_can_assume_the_deploy_role(bootstrap):
    (trust,) = bootstrap["Resources"]["DeployRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    condition = trust["Condition"]["StringEquals"]
    assert condition["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    assert condition["token.actions.githubusercontent.com:sub"] == {
        "Fn::Sub": "repo:${GitHubRepository}:environment:${GitHubEnvironment}"
    }
    provider = bootstrap["Resources"]["GitHubOidcProvider"]
    assert provider["Properties"]["Url"] == "https://token.actions.githubusercontent.com"
    assert provider["Condition"] == "CreatesProvider", "an account holds one provider per URL"


def test_the_deploy_role_changes_nothing_itself(bootstrap):
    deploy = statements(bootstrap["Resources"]["DeployRole"])
    every = {a for s in deploy for a in actions(s)}
    for forbidden in ("iam:CreateRole", "lambda:*", "dynamodb:*", "route53:ChangeResourceRecordSets", "cloudformation:*"):
        assert forbidden not in every, forbidden
    stacks = next(s for s in deploy if s["Sid"] == "ChangeSetsOnTheWsdrStacks")
    resources = [r["Fn::Sub"] for r in stacks["Resource"]]
    assert all(":stack/" in r for r in resources)
    assert any("${StackPrefix}-primary/*" in r for r in resources)
    assert any("${StackPrefix}-secondary/*" in r for r in resources)
    pass_role = next(s for s in deploy if s["Sid"] == "PassOnlyTheServiceRole")
    assert pass_role["Resource"] == {"Fn::GetAtt": ["CloudFormationRole", "Arn"]}
    assert pass_role["Condition"]["StringEquals"]["iam:PassedToService"] == "cloudformation.amazonaws.com"


def test_the_service_role_changes_records_of_one_hosted_zone_only(bootstrap):
    role = bootstrap["Resources"]["CloudFormationRole"]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "cloudformation.amazonaws.com"}
    service = statements(role)
    records = next(s for s in service if "route53:ChangeResourceRecordSets" in actions(s))
    assert records["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:route53:::hostedzone/${HostedZoneId}"}
    iam = next(s for s in service if "iam:CreateRole" in actions(s))
    assert iam["Resource"]["Fn::Sub"].endswith(":role/${StackPrefix}-*")
    for statement in service:
        if "*" in actions(statement):
            pytest.fail(f"{statement['Sid']}: every action")


def _arn_matches(pattern, arn):
    """IAM's wildcard match of a `Fn::Sub` resource against an ARN (the bootstrap's defaults)."""
    import fnmatch

    concrete = (pattern.replace("${AWS::Partition}", "aws").replace("${AWS::AccountId}", "123456789012")
                .replace("${StateTableName}", "wsdr-state").replace("${StackPrefix}", "wsdr"))
    return fnmatch.fnmatchcase(arn, concrete)


@pytest.mark.parametrize("table", ["wsdr-state", "wsdr-state-strong"])
def test_both_documented_state_tables_are_in_reach_of_the_deploy_and_the_service_role(bootstrap, table):
    """docs/DEPLOY.md deploys strong mode on `wsdr-state-strong`: make deploy-secondary's
    DescribeTable (deploy role) and the stack's table changes (service role) must reach it."""
    arn = f"arn:aws:dynamodb:us-west-2:123456789012:table/{table}"
    deploy = statements(bootstrap["Resources"]["DeployRole"])
    reads = next(s for s in deploy if s["Sid"] == "PreDeployReads")
    assert _arn_matches(reads["Resource"]["Fn::Sub"], arn), reads["Resource"]
    service = statements(bootstrap["Resources"]["CloudFormationRole"])
    tables = next(s for s in service if s["Sid"] == "Tables")
    assert any(_arn_matches(r["Fn::Sub"], arn) for r in tables["Resource"]), tables["Resource"]


def test_a_fresh_account_can_get_the_two_service_linked_roles_and_no_other(bootstrap):
    """The first global table and the first API Gateway custom domain create their services'
    linked roles as the caller; the service role may create exactly those two."""
    role = bootstrap["Resources"]["CloudFormationRole"]
    creating = [s for s in statements(role) if "iam:CreateServiceLinkedRole" in actions(s)]
    assert len(creating) == 1, creating
    (statement,) = creating
    services = statement["Condition"]["StringEquals"]["iam:AWSServiceName"]
    assert sorted(services) == ["ops.apigateway.amazonaws.com", "replication.dynamodb.amazonaws.com"]
    assert "aws-service-role/" in statement["Resource"]["Fn::Sub"]


def test_a_rollback_can_list_what_it_must_remove(bootstrap):
    """Deleting a role lists its policies first; deleting a tagged alarm reads and removes its
    tags: without these a rollback ends ROLLBACK_FAILED and a retry does not start clean."""
    granted = {a for s in statements(bootstrap["Resources"]["CloudFormationRole"]) for a in actions(s)}
    for action in ("iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "cloudwatch:UntagResource",
                   "cloudwatch:ListTagsForResource"):
        assert action in granted, action


def test_a_deployer_cannot_make_a_role_beyond_the_boundary(bootstrap):
    """Every action that creates a wsdr role or changes its permissions is allowed only with
    the boundary on it; nobody may take the boundary off or rewrite it; the boundary itself
    grants no IAM, and its secrets and tables are wsdr's."""
    role = bootstrap["Resources"]["CloudFormationRole"]
    shaping = {"iam:CreateRole", "iam:PutRolePolicy", "iam:DeleteRolePolicy", "iam:AttachRolePolicy",
               "iam:DetachRolePolicy", "iam:PutRolePermissionsBoundary"}
    for statement in statements(role):
        granted = set(actions(statement)) & shaping
        if statement["Effect"] == "Allow" and granted:
            assert statement["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": {"Ref": "FunctionBoundary"}}}, statement
    (deny,) = [s for s in statements(role) if s["Effect"] == "Deny"]
    assert "iam:DeleteRolePermissionsBoundary" in actions(deny)
    assert {"Ref": "FunctionBoundary"} in deny["Resource"]
    boundary = bootstrap["Resources"]["FunctionBoundary"]["Properties"]["PolicyDocument"]["Statement"]
    for statement in boundary:
        assert statement["Effect"] == "Allow"
        assert not any(a.startswith(("iam:", "sts:", "lambda:", "cloudformation:")) for a in actions(statement)), statement
        if any(a.startswith("secretsmanager:") for a in actions(statement)):
            assert "${SecretNamePrefix}" in statement["Resource"]["Fn::Sub"]
    assert bootstrap["Outputs"]["FunctionBoundaryArn"]["Value"] == {"Ref": "FunctionBoundary"}


def test_the_push_queues_are_in_reach_of_the_service_role_and_the_boundary_only_under_the_prefix(bootstrap):
    """CloudFormation creates and deletes the push queues (names derived from the stack's,
    so under the prefix); the boundary lets the functions send, receive and delete messages of
    those queues only."""
    service = statements(bootstrap["Resources"]["CloudFormationRole"])
    (queues,) = [s for s in service if s.get("Sid") == "Queues"]
    for action in ("sqs:CreateQueue", "sqs:DeleteQueue", "sqs:SetQueueAttributes", "sqs:GetQueueAttributes", "sqs:TagQueue"):
        assert action in actions(queues), action
    assert queues["Resource"]["Fn::Sub"].endswith(":sqs:*:${AWS::AccountId}:${StackPrefix}-*")
    boundary = bootstrap["Resources"]["FunctionBoundary"]["Properties"]["PolicyDocument"]["Statement"]
    (sqs,) = [s for s in boundary if any(a.startswith("sqs:") for a in actions(s))]
    assert set(actions(sqs)) >= {"sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    assert sqs["Resource"]["Fn::Sub"].endswith(":sqs:*:${AWS::AccountId}:${StackPrefix}-*")


def test_api_gateway_actions_reach_v2_apis_and_domains_only(bootstrap):
    """Never a REST API, usage plan or API key: the V2 paths, the account, tags."""
    role = bootstrap["Resources"]["CloudFormationRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    (st,) = [s for s in role["Statement"] if s.get("Sid") == "WebSocketApisAndDomains"]
    paths = sorted(r["Fn::Sub"].rsplit("::", 1)[1] for r in st["Resource"])
    assert paths == ["/account", "/apis", "/apis/*", "/domainnames", "/domainnames/*", "/tags/*"], paths
    everything = [s for s in role["Statement"] if any("apigateway" in str(a) for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]
    assert everything == [st], "no other statement reaches API Gateway"


# What CloudFormation calls, as the service role, to create and delete each resource type the
# stacks make (each type's handlers in the CloudFormation resource provider schemas list more;
# these are the ones without which a create or a delete cannot start). A type missing here
# fails the test below: a new kind of resource must be given its actions, and the role them.
CREATE_AND_DELETE = {
    "AWS::ApiGateway::Account": ["apigateway:PATCH", "apigateway:GET", "iam:PassRole"],
    "AWS::ApiGatewayV2::Api": ["apigateway:POST", "apigateway:DELETE", "apigateway:GET"],
    "AWS::ApiGatewayV2::ApiMapping": ["apigateway:POST", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::Authorizer": ["apigateway:POST", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::DomainName": ["apigateway:POST", "apigateway:DELETE", "acm:DescribeCertificate"],
    "AWS::ApiGatewayV2::Integration": ["apigateway:POST", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::Route": ["apigateway:POST", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::RouteResponse": ["apigateway:POST", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::Stage": ["apigateway:POST", "apigateway:DELETE", "logs:CreateLogDelivery"],
    "AWS::CloudWatch::Alarm": ["cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:DescribeAlarms"],
    "AWS::DynamoDB::GlobalTable": [
        "dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:DescribeTable",
        "dynamodb:CreateTableReplica", "dynamodb:UpdateTable", "iam:CreateServiceLinkedRole",
    ],
    "AWS::DynamoDB::Table": ["dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:DescribeTable"],
    "AWS::Events::Rule": ["events:PutRule", "events:PutTargets", "events:DeleteRule", "events:RemoveTargets"],
    "AWS::IAM::Role": ["iam:CreateRole", "iam:PutRolePolicy", "iam:DeleteRole", "iam:DeleteRolePolicy", "iam:GetRole"],
    "AWS::Lambda::EventInvokeConfig": ["lambda:PutFunctionEventInvokeConfig", "lambda:DeleteFunctionEventInvokeConfig"],
    "AWS::Lambda::EventSourceMapping": [
        "lambda:CreateEventSourceMapping", "lambda:DeleteEventSourceMapping", "lambda:GetEventSourceMapping",
    ],
    "AWS::Lambda::Function": ["lambda:CreateFunction", "lambda:DeleteFunction", "lambda:GetFunction", "iam:PassRole"],
    "AWS::Lambda::Permission": ["lambda:AddPermission", "lambda:RemovePermission"],
    "AWS::Lambda::Url": ["lambda:CreateFunctionUrlConfig", "lambda:DeleteFunctionUrlConfig"],
    "AWS::Logs::LogGroup": ["logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:PutRetentionPolicy"],
    "AWS::Logs::MetricFilter": ["logs:PutMetricFilter", "logs:DeleteMetricFilter"],
    "AWS::Route53::HealthCheck": ["route53:CreateHealthCheck", "route53:DeleteHealthCheck", "route53:ChangeTagsForResource"],
    "AWS::Route53::RecordSet": ["route53:ChangeResourceRecordSets", "route53:GetChange", "route53:ListResourceRecordSets"],
    "AWS::SQS::Queue": ["sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes"],
    "AWS::ARCRegionSwitch::Plan": ["arc-region-switch:CreatePlan", "arc-region-switch:DeletePlan", "arc-region-switch:GetPlan"],
}


def allows(role, action):
    """Some Allow statement of the role names the action (exactly or by a wildcard); none
    Denies it outright."""
    import fnmatch

    def named(statement):
        return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in actions(statement))

    stmts = statements(role)
    denied = any(s["Effect"] == "Deny" and named(s) and s.get("Resource") == "*" for s in stmts)
    return not denied and any(s["Effect"] == "Allow" and named(s) for s in stmts)


def stack_resource_types():
    from test_transform import translated

    types = set()
    for role, region, extra in [
        ("primary", "us-east-1", None),
        ("secondary", "us-west-2", None),
        ("primary", "us-east-1", {"Consistency": "strong", "WitnessRegion": "us-east-2"}),
    ]:
        types |= {r["Type"] for r in translated(role, region, extra)["Resources"].values()}
    tpl, matches = decode(str(ROOT / "arc" / "region-switch.yaml"))
    assert not matches, matches
    types |= {r["Type"] for r in tpl["Resources"].values()}
    return types


def test_the_service_role_can_create_and_delete_every_resource_type_the_stacks_make(bootstrap):
    role = bootstrap["Resources"]["CloudFormationRole"]
    types = stack_resource_types()
    unmapped = sorted(types - CREATE_AND_DELETE.keys())
    assert not unmapped, f"resource types with no create/delete actions listed here: {unmapped}"
    missing = {t: [a for a in CREATE_AND_DELETE[t] if not allows(role, a)] for t in sorted(types)}
    missing = {t: m for t, m in missing.items() if m}
    assert not missing, f"the service role cannot: {missing}"


def test_the_region_switch_plans_role_carries_the_boundary_the_service_role_requires(bootstrap):
    tpl, _ = decode(str(ROOT / "arc" / "region-switch.yaml"))
    role = tpl["Resources"]["PlanExecutionRole"]["Properties"]
    assert role["PermissionsBoundary"] == {
        "Fn::If": ["HasPermissionsBoundary", {"Ref": "PermissionsBoundaryArn"}, {"Ref": "AWS::NoValue"}]
    }
    creates = [
        s for s in statements(bootstrap["Resources"]["CloudFormationRole"])
        if "iam:CreateRole" in actions(s) and s["Effect"] == "Allow"
    ]
    assert creates and all("iam:PermissionsBoundary" in s["Condition"]["StringEquals"] for s in creates)
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("deploy-region-switch:", 1)[1].split("\n\n", 1)[0]
    assert "PermissionsBoundaryArn=$(PERMISSIONS_BOUNDARY_ARN)" in recipe
