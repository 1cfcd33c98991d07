"""The IAM linter (parliament) over every policy the templates create
(tests/policies/export_policies.py writes them). Each statement is linted on its own, so that
a finding names its statement. A finding is either fixed or suppressed in place: a comment
right above the statement's `- Sid:` line in its template, reading
`# parliament-ignore <ISSUE>: <the reason>` (the reason may continue on the next comment
lines). A finding on a statement without a Sid cannot be suppressed. Run with the scanners'
Python (scripts/scanners.sh): python parliament_check.py <policies.json>."""

import json
import re
import sys
from pathlib import Path

from parliament import analyze_policy_string

ROOT = Path(__file__).resolve().parents[2]


def ignores(source):
    """{Sid: {issue: reason}} from a template's `# parliament-ignore` comments."""
    lines = (ROOT / source).read_text().splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"\s*- Sid: (\S+)\s*$", line)
        if not m:
            continue
        j = i - 1
        comments = []
        while j >= 0 and lines[j].strip().startswith("#"):
            comments.insert(0, lines[j].strip().lstrip("#").strip())
            j -= 1
        text = " ".join(comments)
        for issue, reason in re.findall(r"parliament-ignore (\w+): (.*?)(?= parliament-ignore |$)", text):
            out.setdefault(m.group(1), {})[issue] = reason.strip()
    return out


def main():
    documents = json.loads(Path(sys.argv[1]).read_text())
    known = {}
    unexplained, suppressed, used = [], 0, set()
    for doc in documents:
        source = doc["source"]
        known.setdefault(source, ignores(source))
        version = doc["document"].get("Version")
        if version != "2012-10-17":
            unexplained.append(f"{doc['where']}: Version {version!r} (IAM would read the 2008-10-17 language)")
        for st in doc["document"]["Statement"]:
            sid = st.get("Sid")
            policy = analyze_policy_string(
                json.dumps({"Version": "2012-10-17", "Statement": [st]}),
                include_community_auditors=True,
            )
            for finding in policy.findings:
                reason = known[source].get(sid or "", {}).get(finding.issue)
                if reason:
                    suppressed += 1
                    used.add((source, sid, finding.issue))
                    continue
                detail = json.dumps(finding.detail)[:300]
                unexplained.append(f"{doc['where']}: statement {sid or '(no Sid)'}: {finding.issue} {detail}")
    # A suppression no finding needs any more is stale: remove it.
    stale = [f"{source}: {sid}: {issue}" for source, by_sid in known.items() for sid, issues in by_sid.items()
             for issue in issues if (source, sid, issue) not in used]
    for line in unexplained:
        print(f"parliament: {line}")
    for line in stale:
        print(f"parliament: stale suppression {line}")
    print(f"parliament: {len(documents)} policies, {suppressed} findings suppressed in place with a reason, "
          f"{len(unexplained)} unexplained, {len(stale)} stale suppressions")
    sys.exit(1 if unexplained or stale else 0)


if __name__ == "__main__":
    main()
