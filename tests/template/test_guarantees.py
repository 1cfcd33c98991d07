"""The guarantee table in docs/RELIABILITY.md is complete and true to the code.

Every row: a promise stated word for word in the doc it names, at least one checker rule that
exists (a violation kind of the history checker, or a test function in the workspace), at
least one mutant patch in scripts/mutants/, and exceptions that are the checker's named
excuses. And the other way: every violation kind is some row's rule, every excuse some row's
exception, every mutant some row's mutant.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
HISTORY = ROOT / "crates/lab/src/sim/history.rs"


def normalized(text):
    return " ".join(text.replace("**", "").split())


def table_rows():
    text = (ROOT / "docs/RELIABILITY.md").read_text()
    match = re.search(r"<!-- guarantee-table -->\n(.*?)<!-- /guarantee-table -->", text, re.S)
    assert match, "docs/RELIABILITY.md has no guarantee table"
    rows = []
    for line in match.group(1).strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 6, f"a row needs six cells: {line}"
        rows.append(dict(zip(["id", "doc", "promise", "rules", "mutants", "exceptions"], cells)))
    return rows


def names(cell):
    return re.findall(r"`([^`]+)`", cell)


def violation_kinds():
    text = HISTORY.read_text()
    body = re.search(r"pub enum Violation \{\n(.*?)\n\}", text, re.S).group(1)
    variants = re.findall(r"^    ([A-Z][A-Za-z]+)(?: \{|,)", body, re.M)
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", v).lower() for v in variants}


def excuse_names():
    return set(re.findall(r'Excuse::[A-Za-z]+ => "([a-z_]+)"', HISTORY.read_text()))


def workspace_functions():
    found = set()
    for path in (ROOT / "crates").rglob("*.rs"):
        found.update(re.findall(r"fn ([a-z0-9_]+)\s*\(", path.read_text()))
    return found


def mutants():
    return {p.stem for p in (ROOT / "scripts/mutants").glob("*.patch")}


def test_every_row_is_a_stated_promise_with_a_rule_and_a_mutant():
    rows = table_rows()
    assert rows
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
    kinds, tests, patches, excuses = violation_kinds(), workspace_functions(), mutants(), excuse_names()
    for row in rows:
        doc = ROOT / row["doc"]
        assert doc.is_file(), f"{row['id']}: no such doc {row['doc']}"
        assert normalized(row["promise"]) in normalized(doc.read_text()), (
            f"{row['id']}: {row['doc']} does not say, word for word: {row['promise']}"
        )
        rules = names(row["rules"])
        assert rules, f"{row['id']} has no rule"
        for rule in rules:
            assert rule in kinds or rule in tests, f"{row['id']}: no violation kind or test `{rule}`"
        row_mutants = names(row["mutants"])
        assert row_mutants, f"{row['id']} has no mutant"
        for mutant in row_mutants:
            assert mutant in patches, f"{row['id']}: no scripts/mutants/{mutant}.patch"
        for exception in names(row["exceptions"]):
            assert exception in excuses, f"{row['id']}: `{exception}` is not an excuse the checker makes"


def test_every_rule_excuse_and_mutant_is_named_by_a_row():
    rows = table_rows()
    rules = {n for r in rows for n in names(r["rules"])}
    missing = violation_kinds() - rules
    assert not missing, f"checker rules no row names: {sorted(missing)}"
    excused = {n for r in rows for n in names(r["exceptions"])}
    missing = excuse_names() - excused
    assert not missing, f"excuses no row states: {sorted(missing)}"
    named = {n for r in rows for n in names(r["mutants"])}
    missing = mutants() - named
    assert not missing, f"mutants no row names: {sorted(missing)}"


def test_the_parsers_see_the_checker():
    # A parser that finds nothing would make the completeness test pass vacuously.
    assert {"acknowledged_op_missing", "failed_op_present", "winner_unreadable", "evacuation_incomplete"} <= violation_kinds()
    assert "lost_with_region" in excuse_names()
    assert len(mutants()) >= 18


def test_every_mutant_still_applies_to_the_tree():
    # A patch the code has moved away from breaks nothing: it fails to apply, and the mutation
    # run that should catch it stops there. Each must apply to the tree as it is.
    import subprocess

    stale = []
    for patch in sorted((ROOT / "scripts/mutants").glob("*.patch")):
        result = subprocess.run(
            ["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True
        )
        if result.returncode != 0:
            stale.append(f"{patch.stem}: {result.stderr.strip()}")
    assert not stale, "mutants that no longer apply:\n" + "\n".join(stale)
