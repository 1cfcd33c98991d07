"""The release workflow: least privilege per job, the release published only after both
Regions run it, pinned tools, and no slow source installs."""

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())


def test_no_permission_is_granted_workflow_wide(workflow):
    assert workflow["permissions"] == {}


def test_each_job_gets_only_what_it_uses(workflow):
    jobs = workflow["jobs"]
    for name, job in jobs.items():
        assert "permissions" in job, f"{name} inherits nothing and says what it needs"
    writers = {n for n, j in jobs.items() if j["permissions"].get("contents") == "write"}
    assert writers == {"publish"}, writers
    oidc = {n for n, j in jobs.items() if j["permissions"].get("id-token") == "write"}
    assert oidc == {"deploy-primary", "deploy-secondary", "publish-npm"}, oidc


def test_release_is_published_after_the_secondary_is_deployed(workflow):
    jobs = workflow["jobs"]
    assert jobs["deploy-primary"]["needs"] == "build"
    assert jobs["deploy-secondary"]["needs"] == ["build", "deploy-primary"]
    assert "needs.deploy-primary.result == 'success'" in jobs["deploy-secondary"]["if"]
    assert jobs["publish"]["needs"] == "deploy-secondary"
    for name, job in jobs.items():
        if name != "publish":
            assert "gh release" not in yaml.safe_dump(job), f"{name} publishes before both deploys"


def test_client_packages_are_published_after_both_deploys_and_dry_run_in_make_test(workflow):
    jobs = workflow["jobs"]
    for name in ("publish-crates", "publish-npm"):
        assert jobs[name]["needs"] == "deploy-secondary", name
        assert jobs[name]["if"] == "${{ !inputs.secondary_only }}", name
    crates = " ".join(s.get("run", "") for s in jobs["publish-crates"]["steps"])
    assert "cargo publish -p wsdr-protocol -p wsdr-net -p wsdr-client" in crates
    npm = " ".join(s.get("run", "") for s in jobs["publish-npm"]["steps"])
    assert "npm publish --provenance" in npm
    # The same commands, dry, in make test.
    makefile = (ROOT / "Makefile").read_text()
    assert "publish --dry-run" in makefile
    assert "npm publish --dry-run" in (ROOT / "scripts/npm-package-check.sh").read_text()


def test_tools_are_pinned_and_installed_from_wheels(workflow):
    assert re.fullmatch(r"\d+\.\d+\.\d+", workflow["env"]["SAM_CLI_VERSION"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", workflow["env"]["CARGO_LAMBDA_VERSION"])
    runs = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert not any("cargo install" in r for r in runs), "cargo-lambda from its wheel, not a 10-30 minute build"
    for line in (l for r in runs for l in r.splitlines() if "pip install" in l):
        for package in ("aws-sam-cli", "cargo-lambda"):
            if package in line:
                assert f"{package}==" in line, line


def test_rust_builds_are_cached(workflow):
    for name in ("test", "build"):
        uses = [s.get("uses", "") for s in workflow["jobs"][name]["steps"]]
        assert any(u.startswith("Swatinem/rust-cache@") for u in uses), name


def test_the_deploys_run_as_the_bootstraps_service_role(workflow):
    env = workflow["jobs"]["deploy-primary"]["env"]
    assert env["CFN_ROLE_ARN"] == "${{ vars.WSDR_CFN_ROLE_ARN }}"
    assert env["PERMISSIONS_BOUNDARY_ARN"] == "${{ vars.WSDR_PERMISSIONS_BOUNDARY_ARN }}"
    makefile = (ROOT / "Makefile").read_text()
    assert "$(if $(CFN_ROLE_ARN),--role-arn $(CFN_ROLE_ARN))" in makefile
    assert "$(if $(PERMISSIONS_BOUNDARY_ARN),PermissionsBoundaryArn=$(PERMISSIONS_BOUNDARY_ARN))" in makefile


def test_every_function_bootstrap_is_attached_to_the_release(workflow):
    steps = yaml.safe_dump(workflow["jobs"]["build"])
    for fn in ("ws-handler", "authorizer", "canary", "evacuator", "health"):
        assert fn in steps, fn


def test_the_secondary_can_be_deployed_alone_while_the_primarys_region_is_down(workflow):
    """A dispatch with secondary_only skips the primary's deploy (its Region does not answer)
    and publishes nothing; the secondary's job runs on the build alone, and its make target
    reads the primary's outputs from its own Region (test_scripts.py)."""
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["workflow_dispatch"]["inputs"]["secondary_only"]["type"] == "boolean"
    jobs = workflow["jobs"]
    assert jobs["deploy-primary"]["if"] == "${{ !inputs.secondary_only }}"
    assert jobs["publish"]["if"] == "${{ !inputs.secondary_only }}"
    condition = jobs["deploy-secondary"]["if"]
    assert "inputs.secondary_only" in condition and "needs.build.result == 'success'" in condition
    assert "!cancelled()" in condition, "a skipped primary must not skip the secondary"
