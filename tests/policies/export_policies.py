"""Every IAM policy the templates create, as CloudFormation would make them, for the IAM
linter (tests/policies/parliament_check.py): the SAM transform's roles (inline policies and
the managed policies it attaches by name are not ours: only inline documents), the bootstrap
roles and boundary (ci/bootstrap.yaml), the Region switch plan's role (arc/region-switch.yaml).
Intrinsics become the values CloudFormation would give them (ARNs of the right shape for each
resource type), so that the linter can check each action against its resource. Run with the
test tools' Python (scripts/python-tools.sh); writes JSON to the path given."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "template"))
from cfnlint.decode import decode  # noqa: E402
from test_transform import resolved, translated  # noqa: E402

ACCOUNT = "123456789012"

# The stack configurations whose roles differ: the primary, and the secondary with every
# optional role (evacuating the primary, fast failovers, the judge).
CONFIGS = [
    ("primary", "us-east-1", {}),
    (
        "secondary",
        "us-west-2",
        {
            "PrimaryApiId": "abc123defg",
            "PrimaryRegionalDomainName": "d-abc.execute-api.us-east-1.amazonaws.com",
            "PrimaryRegionalHostedZoneId": "Z1UJRXOUMOOFQ8",
            "StateTableStreamArn": f"arn:aws:dynamodb:us-west-2:{ACCOUNT}:table/wsdr-state/stream/2026-01-01T00:00:00.000",
            "PrimaryConnectionsTableName": "wsdr-primary-ConnectionsTable-ABC",
        },
    ),
]


def arn_of(resources, name, attribute, region, stack):
    """The ARN (or attribute) CloudFormation would give `name`, by its type."""
    kind = resources[name]["Type"]
    physical = f"{stack}-{name}-ABC123"
    service = {
        "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{physical}",
        "AWS::DynamoDB::GlobalTable": f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{physical}",
        "AWS::SQS::Queue": f"arn:aws:sqs:{region}:{ACCOUNT}:{physical}",
        "AWS::Lambda::Function": f"arn:aws:lambda:{region}:{ACCOUNT}:function:{physical}",
        "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{physical}",
        "AWS::CloudWatch::Alarm": f"arn:aws:cloudwatch:{region}:{ACCOUNT}:alarm:{physical}",
        "AWS::Events::Rule": f"arn:aws:events:{region}:{ACCOUNT}:rule/{physical}",
        "AWS::Logs::LogGroup": f"arn:aws:logs:{region}:{ACCOUNT}:log-group:{physical}:*",
        "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{ACCOUNT}:policy/{physical}",
        "AWS::CloudFront::Distribution": f"arn:aws:cloudfront::{ACCOUNT}:distribution/E123ABC",
    }.get(kind, f"arn:aws:unknown:{region}:{ACCOUNT}:{physical}")
    if attribute == "Arn" or (attribute == "Ref" and kind == "AWS::IAM::ManagedPolicy"):
        return service
    if attribute == "StreamArn":
        return f"{service}/stream/2026-01-01T00:00:00.000"
    return physical


def substituted(value, names, resources, region, stack):
    """Fn::Sub, Ref, GetAtt and Join as CloudFormation would evaluate them."""
    if isinstance(value, list):
        return [substituted(v, names, resources, region, stack) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (fn, args), = value.items()
        if fn == "Ref":
            if args in names:
                return names[args]
            if args in resources:
                return arn_of(resources, args, "Ref", region, stack)
        if fn == "Fn::GetAtt":
            target, attribute = args if isinstance(args, list) else args.split(".", 1)
            return arn_of(resources, target, attribute, region, stack)
        if fn == "Fn::Sub":
            text, extra = (args, {}) if isinstance(args, str) else args
            local = {k: substituted(v, names, resources, region, stack) for k, v in extra.items()}

            def one(m):
                key = m.group(1)
                if key in local:
                    return str(local[key])
                if "." in key:
                    target, attribute = key.split(".", 1)
                    return arn_of(resources, target, attribute, region, stack)
                if key in names:
                    return str(names[key])
                if key in resources:
                    return arn_of(resources, key, "Ref", region, stack)
                raise KeyError(f"Fn::Sub: {key}")

            return re.sub(r"\$\{([^}!]+)\}", one, text)
        if fn == "Fn::If":
            # The bootstrap and plan templates: the branch that grants (a statement present
            # in some configuration is linted as if present).
            return substituted(args[1], names, resources, region, stack)
        if fn == "Fn::Join":
            sep, parts = args
            return sep.join(str(p) for p in substituted(parts, names, resources, region, stack))
    return {k: substituted(v, names, resources, region, stack) for k, v in value.items()}


def documents(resources, names, region, stack, origin):
    out = []
    for name, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                out.append({
                    "source": origin.split(" ")[0],
                    "where": f"{origin}: {name} ({policy.get('PolicyName', '?')})",
                    "document": _drop_no_value(substituted(policy["PolicyDocument"], names, resources, region, stack)),
                })
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            out.append({
                "source": origin.split(" ")[0],
                "where": f"{origin}: {name}",
                "document": _drop_no_value(substituted(props["PolicyDocument"], names, resources, region, stack)),
            })
    return out


def _drop_no_value(value):
    if isinstance(value, list):
        return [_drop_no_value(v) for v in value if v != {"Ref": "AWS::NoValue"}]
    if isinstance(value, dict):
        return {k: _drop_no_value(v) for k, v in value.items() if v != {"Ref": "AWS::NoValue"}}
    return value


def main():
    found = []
    for role, region, extra in CONFIGS:
        params = {"Role": role, **extra}
        out = translated(role, region, params)
        stack = f"wsdr-{role}"
        values = {k: v.get("Default") for k, v in out["Parameters"].items()}
        values.update(params)
        names = {**{k: v for k, v in values.items() if v is not None}, "AWS::Region": region,
                 "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::StackName": stack,
                 "AWS::URLSuffix": "amazonaws.com", "DomainName": "auction.example.com",
                 "HostedZoneId": "Z123", "CanarySecretName": "wsdr/canary"}
        resources = resolved(out, params)
        kept = {k: v for k, v in resources.items()
                if "Condition" not in out["Resources"][k] or _holds(out, values, out["Resources"][k]["Condition"])}
        found += documents(kept, names, region, stack, f"template.yaml ({role})")
    custom = {"CustomActionFunctionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:wsdr-custom-action",
              "HostedZoneId": "Z123"}
    for path, defaults in [("ci/bootstrap.yaml", {"HostedZoneId": "Z123"}), ("arc/region-switch.yaml", custom)]:
        tpl, matches = decode(str(ROOT / path))
        assert not matches, matches
        values = {k: v.get("Default", f"wsdr-{k.lower()}") for k, v in tpl.get("Parameters", {}).items()}
        values.update(defaults)
        names = {**values, "AWS::Region": "us-east-1", "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                 "AWS::StackName": "wsdr-bootstrap", "AWS::URLSuffix": "amazonaws.com"}
        found += documents(tpl["Resources"], names, "us-east-1", "wsdr-bootstrap", path)
    Path(sys.argv[1]).write_text(json.dumps(found, indent=1))
    print(f"{len(found)} policy documents from the templates")


def _holds(out, values, name):
    expr = out["Conditions"][name]

    def value(v):
        if isinstance(v, dict) and list(v) == ["Ref"]:
            return values.get(v["Ref"])
        return v

    def holds(e):
        (fn, args), = e.items()
        if fn == "Condition":
            return holds(out["Conditions"][args])
        if fn == "Fn::Equals":
            return value(args[0]) == value(args[1])
        if fn == "Fn::Not":
            return not holds(args[0])
        if fn == "Fn::And":
            return all(holds(a) for a in args)
        if fn == "Fn::Or":
            return any(holds(a) for a in args)
        raise AssertionError(e)

    return holds(expr)


if __name__ == "__main__":
    main()
