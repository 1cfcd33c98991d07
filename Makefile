# wsdr: the two commands that matter are `make demo` and `make test`.
# Every target installs what it needs, idempotently, so both work on a fresh machine.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo

.PHONY: mutants mutants-diff mutants-web release-check lambda-host-build lab evacuate restore check-concurrency smoke rehearse package-check npm-package-check deps-check js-test browser-test chaos-short chaos fuzz load invoke-local sam-build deploy-vars
.PHONY: all test test-steps test-build unit fmt fmt-check lint clippy clippy-lean template-lint sam-validate demo bench clean \
	package deploy-primary deploy-secondary destroy

all: test

## test: formatting, lints, every test (with DynamoDB Local started and stopped around them)
TEST_STEPS := fmt-check deps-check template-lint test-build unit invoke-local js-test npm-package-check browser-test chaos-short
## release-check: what the release workflow checks before it builds and publishes, and not
## `make test` (each is a build of its own, in its own target directory: together about a
## third of a fresh clone's CPU): cargo-lambda's host build and layout (lambda-host-build), the
## client crates packaged and built from their packages (package-check), and the lean lab that
## `make demo` builds, linted (clippy-lean)
release-check: lambda-host-build package-check clippy-lean
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=line test-steps WSDR_TEST_LANES=1
test-steps: $(TEST_STEPS)

# Two lanes, one per core of a 2-core machine: the test build and the unit tests in one; the
# linters and package checks, then what reuses the test build (the browser test, the short
# campaigns, the functions started locally) in the other, in the order below: the campaigns'
# CPU meets the unit tests' waits instead of the compiler. Alone, each step is much of the time waiting (on pip and
# npm, on DynamoDB Local, on one test binary at a time, on a single-threaded linter), and the
# other lane's compiler takes that time. Each step still runs as it does alone; the installers
# they share take a lock (scripts/install-lock.sh). Output is grouped by recipe line (make
# prints a command's output when it ends); a failure names its step.
ifdef WSDR_TEST_LANES
unit: | test-build
deps-check: | fmt-check
template-lint: | deps-check
js-test: | template-lint
npm-package-check: | js-test
chaos-short: | npm-package-check test-build
browser-test: | chaos-short
invoke-local: | browser-test test-build
# Without the jobserver in their environment, cargo and the tests size their own parallelism
# to the machine, as they do alone; the lanes only decide what runs beside what.
unexport MAKEFLAGS MFLAGS
endif

# `make test` lints while it builds: for the workspace's own crates, the test build runs
# clippy-driver in place of rustc, exactly as `cargo clippy` does it (RUSTC_WORKSPACE_WRAPPER,
# with CLIPPY_ARGS carrying `-D warnings`), so every lint `cargo clippy --workspace
# --all-targets -- -D warnings` reports fails the build, and the dependencies are compiled
# once instead of once for clippy and again for the tests. Every cargo step of `make test`
# runs under the same wrapper, so none of them rebuilds the workspace's crates. `make clippy`
# is the two plain passes.
CLIPPY_DRIVER := $(shell rustc --print sysroot 2>/dev/null)/bin/clippy-driver
test-steps: export RUSTC_WORKSPACE_WRAPPER := $(CLIPPY_DRIVER)
test-steps: export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# A fresh clone's build has nothing to reuse: incremental compilation only writes its state.
test-steps: export CARGO_INCREMENTAL := 0
# 16 code-generation units per crate instead of 256: on two cores nothing uses more, and each
# unit repeats the inlined code it needs. The test build measured 973 core-seconds instead of
# 1,183, 489 s instead of 594 s (docs/RELIABILITY.md, "make test's time").
test-steps: export CARGO_PROFILE_DEV_CODEGEN_UNITS := 16
# No line tables either: nobody debugs this build, and a failing assertion names its file and
# line without them (the panic location is compiled in).
test-steps: export CARGO_PROFILE_DEV_DEBUG := false

# The lab binary (target/debug/wsdr) the browser test and chaos-short run. Alone, each builds
# just that binary. Under `make test` the unit step has built it already, with the test
# build's features (dev-dependencies unify features, so building the binary on its own
# recompiles tokio and what sits on it: about a minute); asking cargo for the same test build
# again finds it done.
WSDR_BIN_BUILD = $(CARGO) build -p wsdr-lab --bin wsdr
test-steps: WSDR_BIN_BUILD = $(CARGO) test --workspace --all-targets --no-run --quiet
# invoke-local runs the five functions from that same build (scripts/invoke_local.py,
# `--only-lambda-apis`), instead of `cargo run` building them again without dev-dependency
# features: about five minutes of a fresh clone's make test.
test-steps: export WSDR_LAMBDA_PREBUILT := 1

## test-build: the workspace's tests, built (and, under make test, linted) without running;
## cargo's timing report of the build in target/cargo-timings/
test-build:
	$(CARGO) test --workspace --all-targets --no-run --quiet --timings

## unit: every Rust test (DynamoDB Local around them), then the rustdoc examples (on the same
## build: `-p` would resolve features for one crate and rebuild its dependencies)
unit:
	scripts/with-dynamodb-local.sh $(CARGO) test --workspace --all-targets
	$(CARGO) test --quiet --workspace --doc
	# The client as the lab builds it (no TLS: wss:// refused as a configuration error).
	$(CARGO) test --quiet -p wsdr-client --no-default-features --features simulation --lib

## package-check: the client crate and what it depends on package for crates.io (each with
## both licence texts) and build from those packages alone (cargo's own verification, against
## a local registry of the three); a scratch app written from the client's README builds on
## them outside the workspace; the client's rustdoc examples run in `unit`
PACKAGE_TARGET := target/package-check
# The client's native-roots unit tests.
NATIVE_ROOTS_TEST = $(CARGO) test --quiet -p wsdr-client --features native-roots --lib
package-check:
	@for crate in wsdr-protocol wsdr-net wsdr-client; do \
	  files="$$($(CARGO) package --list --allow-dirty -p $$crate 2>/dev/null)"; \
	  for licence in LICENSE-MIT LICENSE-APACHE; do \
	    grep -qx "$$licence" <<<"$$files" || { echo "$$crate's package lacks $$licence (both licences require their text)"; exit 1; }; \
	  done; \
	  manifest="$$($(CARGO) metadata --no-deps --format-version 1 | python3 -c "import json,sys; [print(p['repository'] or '', p['rust_version'] or '', p['description'] or '', p['license'] or '') for p in json.load(sys.stdin)['packages'] if p['name']=='$$crate']")"; \
	  grep -qE '^https://[^ ]+ [0-9.]+ .+ .+$$' <<<"$$manifest" || { echo "$$crate lacks repository, rust-version, description or license: $$manifest"; exit 1; }; \
	done
	@# cargo unpacks the packages it verifies against into CARGO_HOME's registry sources once
	@# per name and version, and never checks a registry unit's sources again: a checkout that
	@# changed a crate without bumping its version would be verified against an earlier one's
	@# copy. Its copies and the verification's own build of them go first.
	@find "$${CARGO_HOME:-$$HOME/.cargo}/registry/src" -mindepth 2 -maxdepth 2 -type d \
	  \( -name 'wsdr-protocol-*' -o -name 'wsdr-net-*' -o -name 'wsdr-client-*' \) \
	  -not -path '*/index.*' -exec rm -rf {} + 2>/dev/null || true
	@rm -rf $(PACKAGE_TARGET)/debug/.fingerprint/wsdr-*
	@# The release's own command, dry: packages the three and verifies each against the others.
	@# Without debug info (CARGO_PROFILE_DEV_DEBUG): these builds are compiled, never debugged.
	CARGO_PROFILE_DEV_DEBUG=false $(CARGO) publish --dry-run --quiet --allow-dirty --target-dir $(PACKAGE_TARGET) -p wsdr-protocol -p wsdr-net -p wsdr-client
	@# A new app from the client's README alone, outside the workspace, on those packages.
	CARGO_PROFILE_DEV_DEBUG=false SCRATCH_TARGET_DIR=$(PACKAGE_TARGET) scripts/scratch-app-check.sh
	@# The client trusting the operating system's roots instead of the Mozilla set.
	$(NATIVE_ROOTS_TEST)

## npm-package-check: the browser client as an npm package: npm pack, install into a scratch
## project, import both entries, exports = declarations, a consumer type-checked by tsc --strict
npm-package-check:
	scripts/npm-package-check.sh

## js-test: unit tests of the browser client's policy (node's own test runner, no packages)
js-test:
	cd web && node --test test/

## browser-test: the control room in headless Debian chromium via playwright-core (installed
## by scripts/browser-tools.sh); screenshots under target/browser/
browser-test:
	scripts/browser-tools.sh
	$(WSDR_BIN_BUILD)
	cd tests/browser && node --test

## chaos-short: 30 simulated failover runs of the auction on the eventual table and 15 on the
## strong one, then 20 and 10 of the chat room, every history checked; each run is a
## deterministic simulation (a function of its seed: a violation prints `wsdr chaos --replay
## SEED ...`, which reruns it exactly)
CHAOS_SEED ?= 1
chaos-short:
	$(WSDR_BIN_BUILD)
	target/debug/wsdr chaos --seed $(CHAOS_SEED) --runs 30 --report target/wsdr/chaos-short.json
	target/debug/wsdr chaos --seed $(CHAOS_SEED) --runs 15 --consistency strong --report target/wsdr/chaos-short-strong.json
	target/debug/wsdr chaos --app chat --seed $(CHAOS_SEED) --runs 20 --report target/wsdr/chaos-short-chat.json
	target/debug/wsdr chaos --app chat --seed $(CHAOS_SEED) --runs 10 --consistency strong --report target/wsdr/chaos-short-chat-strong.json

## mutants: every cargo-mutants mutant of the product crates, crate by crate, in a worktree of
## HEAD with DynamoDB Local and the SQS peer around it (long; CRATES="wsdr-core ..." for some,
## SHARD=k/n for one shard of each); results in target/mutants-runs/, docs/RELIABILITY.md
mutants:
	scripts/mutants.sh $(CRATES)

## mutants-diff: only the mutants on lines changed since BASE (default origin/main, else
## HEAD~1) and on uncommitted ones: run it on your change (MUTANTS_ARGS="--file <path> ...":
## some files only)
mutants-diff:
	scripts/mutants.sh --in-diff $(BASE)

## mutants-web: Stryker over the browser client and the React hook with the node tests
## (results in target/mutants-runs/web/); IN_DIFF=<commit> for the lines changed since it
mutants-web:
	IN_DIFF="$(IN_DIFF)" scripts/mutants-web.sh

## chaos: the long campaign, simulated (the auction: 10,000 runs eventual and 5,000 strong on
## wsdr's timers, then 2,000 eventual on the reference design's; the chat room: 10,000 runs in
## each mode; figures in docs/RELIABILITY.md)
chaos:
	$(CARGO) build --release -p wsdr-lab --bin wsdr
	target/release/wsdr chaos --seed $(CHAOS_SEED) --runs 10000 --report target/wsdr/chaos-report.json
	target/release/wsdr chaos --seed $(CHAOS_SEED) --runs 5000 --consistency strong --report target/wsdr/chaos-report-strong.json
	target/release/wsdr chaos --seed $(CHAOS_SEED) --runs 2000 --timers reference --report target/wsdr/chaos-report-reference.json
	target/release/wsdr chaos --app chat --seed $(CHAOS_SEED) --runs 10000 --report target/wsdr/chaos-report-chat.json
	target/release/wsdr chaos --app chat --seed $(CHAOS_SEED) --runs 10000 --consistency strong --report target/wsdr/chaos-report-chat-strong.json

## fuzz: every cargo-fuzz target for FUZZ_SECS seconds each
FUZZ_SECS ?= 60
fuzz:
	scripts/fuzz.sh $(FUZZ_SECS)

## load: 5,000 connections bidding for 60 s (lost bids, memory growth, stuck connections)
load:
	$(CARGO) build --release -p wsdr-lab --bin wsdr
	target/release/wsdr load --connections 5000 --secs 60

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy: clippy-lean
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## clippy-lean: the lab as `make demo` builds it (no DynamoDB, no TLS), so that build cannot rot
# Under `make test` after the test build, in its target directory: the proc macros and build
# scripts the two resolutions share are compiled once.
clippy-lean:
	$(CARGO) clippy -p wsdr-lab --no-default-features --all-targets -- -D warnings

## deps-check: what each crate may link (cargo tree): the domain no AWS, the client neither
## domain nor AWS, no Lambda the in-memory adapters or the lab, each Lambda only the AWS
## clients it calls
deps-check:
	scripts/check-crate-deps.sh

lint: fmt-check clippy deps-check template-lint

## template-lint: cfn-lint, the template's property tests, actionlint (tools in the per-user tool cache), and
## the offline policy scans (checkov, parliament: scripts/policy-scan.sh, scripts/scanners.sh)
template-lint:
	@bin="$$(scripts/python-tools.sh)"; \
	"$$bin/cfn-lint" template.yaml arc/region-switch.yaml ci/bootstrap.yaml; \
	"$$bin/pytest" -q tests/template; \
	"$$bin/actionlint" .github/workflows/release.yml
	scripts/policy-scan.sh

## sam-validate: `sam validate --lint`, offline, with the SAM CLI in its own venv
SAM_CLI_VERSION ?= 1.170.0
sam-validate:
	@[ -x .tools/sam/bin/sam ] && .tools/sam/bin/sam --version | grep -q "$(SAM_CLI_VERSION)" || \
	  { python3 -m venv .tools/sam && .tools/sam/bin/pip install --quiet "aws-sam-cli==$(SAM_CLI_VERSION)"; }
	AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0 .tools/sam/bin/sam validate --lint --region us-east-1 --template template.yaml

## invoke-local: every sample event in events/ through the five Lambdas under `cargo lambda
## watch` (cargo-lambda from PyPI, pinned, by scripts/cargo-lambda.sh), against DynamoDB Local,
## a local @connections/CloudWatch/Secrets Manager peer and `wsdr lab`; part of `make test`
invoke-local:
	bin="$$(scripts/python-tools.sh)"; lambda="$$(scripts/cargo-lambda.sh)"; \
	  PATH="$$lambda:$$PATH" scripts/with-dynamodb-local.sh "$$bin/python" scripts/invoke_local.py

## lambda-host-build: `cargo lambda build --release` of the five functions (LAMBDA_HOST_FUNCTIONS: some) for this machine
## (x86_64), checked: cargo-lambda's bootstrap layout, each an ELF that stops at once outside
## Lambda saying why (scripts/lambda-host-build.sh; arm64 is the release workflow's)
lambda-host-build:
	scripts/lambda-host-build.sh

# ---------------------------------------------------------------- deployment (needs an AWS account)
# Required: DOMAIN HOSTED_ZONE_ID CERT_ARN_PRIMARY CERT_ARN_SECONDARY JWT_ISSUER JWT_AUDIENCE
#           CANARY_SECRET_NAME; optional: JWT_JWKS_URL JWT_ALGORITHMS USER_HS256_SECRET_NAME
#           PRIMARY_REGION SECONDARY_REGION REGIONAL_NAME_PRIMARY REGIONAL_NAME_SECONDARY,
#           EXTRA_PARAMS (more Key=Value overrides for both stacks, e.g. AlarmTopicArn=...),
#           CFN_ROLE_ARN (a CloudFormation service role that makes the changes).
PRIMARY_REGION ?= us-east-1
CONSISTENCY ?= eventual
SECONDARY_REGION ?= us-west-2
STATE_TABLE_NAME ?= wsdr-state
# The secondary's health function (both failover records' checks) gets this much reserved
# concurrency, its watcher and canary 2 each; 0 = none (docs/DEPLOY.md, "Concurrency").
DECISION_PATH_RESERVED_CONCURRENCY ?= 5
# The authorizer's own reservation in both stacks (AuthorizerReservedConcurrency; -1 = none):
# counted by the concurrency check like the decision path's.
AUTHORIZER_RESERVED_CONCURRENCY ?= -1
authorizer_reserve = $(if $(filter -1,$(AUTHORIZER_RESERVED_CONCURRENCY)),0,$(AUTHORIZER_RESERVED_CONCURRENCY))
# What each stack reserves: the decision path (each Region's health function and canary, 2 for
# the canary; the secondary's watcher, 2), the push workers (PUSH_WORKERS: their SQS mapping's
# maximum concurrency, which AWS asks the reservation to cover), the secondary's evacuator of
# the primary (2: its mapping's maximum concurrency) and the authorizer.
PUSH_WORKERS ?= 16
decision_reserve = $$([ "$(DECISION_PATH_RESERVED_CONCURRENCY)" -gt 0 ] && echo $$(( $(DECISION_PATH_RESERVED_CONCURRENCY) + $(1) )) || echo 0)
primary_reserve = $$(( $(call decision_reserve,2) + $(PUSH_WORKERS) + $(authorizer_reserve) ))
secondary_reserve = $$(( $(call decision_reserve,4) + $(PUSH_WORKERS) + 2 + $(authorizer_reserve) ))
# The connections one Region must carry: the stage's route throttle is sized from them (every
# connection heartbeats each 30 s; twice that, and bids: connections / 15 + 500).
CONNECTIONS ?= 30000
ROUTE_RATE_LIMIT = $$(( $(CONNECTIONS) / 15 + 500 ))
# The state table's replicas' deletion protection once the primary stack exists (its first
# create runs without, so that a failed create can remove what it made).
DELETION_PROTECTION ?= true
# FAILOVER_SETTINGS=reference deploys the reference design's failover settings (the verdict
# alarm behind the records, alias records with API Gateway's 60 s TTL, the 120 s evacuation
# wait) instead of wsdr's defaults; docs/DEPLOY.md, "The defaults".
FAILOVER_SETTINGS ?= wsdr
REFERENCE_SETTINGS = HealthCheckType=alarm AliasRecords=true DnsTtl=60
SAM ?= sam
COMMON_PARAMS = PrimaryRegion=$(PRIMARY_REGION) SecondaryRegion=$(SECONDARY_REGION) \
	DomainName=$(DOMAIN) HostedZoneId=$(HOSTED_ZONE_ID) JwtIssuer=$(JWT_ISSUER) \
	JwtAudience=$(JWT_AUDIENCE) $(if $(JWT_JWKS_URL),JwtJwksUrl=$(JWT_JWKS_URL) JwtJwksSnapshot=$$snapshot) \
	$(if $(JWT_ALGORITHMS),JwtAlgorithms=$(JWT_ALGORITHMS)) \
	$(if $(USER_HS256_SECRET_NAME),UserHs256SecretName=$(USER_HS256_SECRET_NAME)) \
	CanarySecretName=$(CANARY_SECRET_NAME) Consistency=$(CONSISTENCY) \
	PushWorkers=$(PUSH_WORKERS) RouteRateLimit=$(ROUTE_RATE_LIMIT) \
	$(if $(filter -1,$(AUTHORIZER_RESERVED_CONCURRENCY)),,AuthorizerReservedConcurrency=$(AUTHORIZER_RESERVED_CONCURRENCY)) \
	$(if $(PERMISSIONS_BOUNDARY_ARN),PermissionsBoundaryArn=$(PERMISSIONS_BOUNDARY_ARN)) \
	$(if $(filter reference,$(FAILOVER_SETTINGS)),$(REFERENCE_SETTINGS)) $(EXTRA_PARAMS)

## package: the three arm64 bootstraps, and the cold-start anchor `make bench` compares them
## with (needs cargo-lambda and zig; see docs/DEPLOY.md)
package:
	@# zig from PyPI (docs/DEPLOY.md): cargo-zigbuild finds it through that venv's python3.
	PATH="$(CURDIR)/.tools/zig/bin:$$PATH" cargo lambda build --release --arm64 --bin ws-handler --bin authorizer --bin canary --bin evacuator --bin health --bin lambda-anchor
	@ls -l target/lambda/*/bootstrap

# What a deploy builds first; SAM_BUILD=false deploys an existing .aws-sam/build as it is
# (the release workflow builds once and deploys that build to both Regions).
SAM_BUILD ?= true
DEPLOY_VARS = DOMAIN HOSTED_ZONE_ID CERT_ARN_PRIMARY CERT_ARN_SECONDARY JWT_ISSUER JWT_AUDIENCE CANARY_SECRET_NAME
deploy-vars:
	@missing=""; for v in $(DEPLOY_VARS); do eval "[ -n \"\$${$$v:-}\" ]" || missing="$$missing $$v"; done; \
	[ -z "$$missing" ] || { echo "set these for a deploy (docs/DEPLOY.md):$$missing"; exit 1; }

## sam-build: the SAM application (the three functions via cargo-lambda) into .aws-sam/build
sam-build:
	$(SAM) build --beta-features

## check-concurrency: the account's Lambda concurrency in both Regions can hold what the stacks reserve
check-concurrency:
	scripts/check-concurrency.sh $(PRIMARY_REGION) wsdr-primary $(primary_reserve)
	scripts/check-concurrency.sh $(SECONDARY_REGION) wsdr-secondary $(secondary_reserve)

# The issuer's keys for a stack's authorizer (scripts/jwks-snapshot.sh): fetched now, or, when
# the issuer cannot be reached (its Region down: the outage a deploy of the survivor is for),
# the snapshot the live stack already has. A failure stops the deploy.
jwks_snapshot = $(if $(JWT_JWKS_URL),snapshot=$$(scripts/jwks-snapshot.sh $(JWT_JWKS_URL) $(1) $(2)) || exit 1;,)

deploy-primary: deploy-vars
	scripts/check-concurrency.sh $(PRIMARY_REGION) wsdr-primary $(primary_reserve)
	@[ "$(SAM_BUILD)" = false ] || $(MAKE) --no-print-directory sam-build
	@$(call jwks_snapshot,$(PRIMARY_REGION),wsdr-primary) \
	deploy() { $(SAM) deploy --config-env primary --region $(PRIMARY_REGION) $(if $(CFN_ROLE_ARN),--role-arn $(CFN_ROLE_ARN)) \
	  --parameter-overrides Role=primary CertificateArn=$(CERT_ARN_PRIMARY) \
	  $(if $(REGIONAL_NAME_PRIMARY),RegionalName=$(REGIONAL_NAME_PRIMARY)) $(COMMON_PARAMS) DeletionProtection=$$1; }; \
	if aws cloudformation describe-stacks --region $(PRIMARY_REGION) --stack-name wsdr-primary >/dev/null 2>&1; then \
	  deploy $(DELETION_PROTECTION); \
	else \
	  echo "first create of wsdr-primary: the state table starts without deletion protection, so that a create that rolls back deletes it (RetainExceptOnCreate) and the retry starts clean; DeletionProtection=$(DELETION_PROTECTION) follows in an update once the stack exists"; \
	  deploy false && { [ "$(DELETION_PROTECTION)" = false ] || deploy $(DELETION_PROTECTION); }; \
	fi && \
	scripts/primary-outputs.sh publish $(PRIMARY_REGION) $(SECONDARY_REGION) wsdr

deploy-secondary: deploy-vars
	scripts/check-concurrency.sh $(SECONDARY_REGION) wsdr-secondary $(secondary_reserve)
	@out() { scripts/primary-outputs.sh read $(PRIMARY_REGION) $(SECONDARY_REGION) wsdr "$$1"; }; \
	api=$$(out ApiId); dom=$$(out RegionalDomainName); zone=$$(out RegionalHostedZoneId); \
	conns=$$(out ConnectionsTableName); table=$$(out StateTableName); \
	healthhost=$$(out HealthUrlHost); verdictalarm=$$(out RegionVerdictAlarmName); \
	[ -n "$$healthhost" ] && [ "$$healthhost" != None ] || healthhost=none; \
	[ -n "$$verdictalarm" ] && [ "$$verdictalarm" != None ] || verdictalarm=none; \
	$(call jwks_snapshot,$(SECONDARY_REGION),wsdr-secondary) \
	[ -n "$$api" ] && [ "$$api" != None ] || { echo "deploy the primary first (make deploy-primary)"; exit 1; }; \
	[ -n "$$table" ] && [ "$$table" != None ] || table=$(STATE_TABLE_NAME); \
	stream=$$(aws dynamodb describe-table --region $(SECONDARY_REGION) --table-name $$table \
	  --query Table.LatestStreamArn --output text); \
	[ -n "$$stream" ] && [ "$$stream" != None ] || { echo "no stream on the state table's $(SECONDARY_REGION) replica"; exit 1; }; \
	switch=$$(scripts/record-kind-guard.sh $(SECONDARY_REGION) wsdr-secondary $(COMMON_PARAMS)) || exit 1; \
	{ [ "$(SAM_BUILD)" = false ] || $(MAKE) --no-print-directory sam-build; } && \
	deploy() { $(SAM) deploy --config-env secondary --region $(SECONDARY_REGION) $(if $(CFN_ROLE_ARN),--role-arn $(CFN_ROLE_ARN)) \
	  --parameter-overrides Role=secondary CertificateArn=$(CERT_ARN_SECONDARY) \
	  $(if $(REGIONAL_NAME_SECONDARY),RegionalName=$(REGIONAL_NAME_SECONDARY)) $(COMMON_PARAMS) \
	  PrimaryApiId=$$api PrimaryRegionalDomainName=$$dom PrimaryRegionalHostedZoneId=$$zone \
	  PrimaryConnectionsTableName=$$conns StateTableStreamArn=$$stream $(REGION_SWITCH_PARAMS) \
	  PrimaryHealthUrlHost=$$healthhost PrimaryVerdictAlarmName=$$verdictalarm \
	  DecisionPathReservedConcurrency=$(DECISION_PATH_RESERVED_CONCURRENCY) "$$@"; }; \
	if [ "$$switch" = two-step ]; then \
	  echo "switching the failover records' kind: first without records (AliasRecords=none), then the new kind"; \
	  deploy AliasRecords=none && deploy; \
	else \
	  deploy; \
	fi

## smoke: after a deploy, one user on each Region's own endpoint and on the global name sends
## heartbeat, getState and one bid; prints which Region answered each. The token: SMOKE_TOKEN
## (from your identity provider), or minted from USER_HS256_SECRET_NAME (HS256 users, docs/AUTH.md).
## LAB=http://127.0.0.1:8787 runs the same against a running `wsdr lab`.
smoke:
	@if [ -n "$(LAB)" ]; then \
	  $(CARGO) run --quiet -p wsdr-lab --bin wsdr -- smoke --lab "$(LAB)"; \
	else \
	  out() { aws cloudformation describe-stacks --region "$$1" --stack-name "$$2" \
	    --query "Stacks[0].Outputs[?OutputKey=='$$3'].OutputValue" --output text; }; \
	  primary=$$(out $(PRIMARY_REGION) wsdr-primary RegionalEndpointUrl); \
	  secondary=$$(out $(SECONDARY_REGION) wsdr-secondary RegionalEndpointUrl); \
	  global=$$(out $(SECONDARY_REGION) wsdr-secondary CustomDomainUrl); \
	  [ -n "$$primary" ] && [ "$$primary" != None ] && [ -n "$$secondary" ] && [ "$$secondary" != None ] || \
	    { echo "deploy both stacks first (make deploy-primary deploy-secondary)"; exit 1; }; \
	  if [ -n "$(SMOKE_TOKEN)" ]; then export WSDR_SMOKE_TOKEN="$(SMOKE_TOKEN)"; token=""; \
	  elif [ -n "$(USER_HS256_SECRET_NAME)" ]; then \
	    WSDR_SMOKE_SECRET=$$(aws secretsmanager get-secret-value --region $(PRIMARY_REGION) \
	      --secret-id "$(USER_HS256_SECRET_NAME)" --query SecretString --output text) || exit 1; \
	    export WSDR_SMOKE_SECRET; \
	    token="--hs256-secret-env WSDR_SMOKE_SECRET --issuer $(JWT_ISSUER) --audience $(JWT_AUDIENCE)"; \
	  else echo "set SMOKE_TOKEN (a user token from your identity provider) or USER_HS256_SECRET_NAME"; exit 1; fi; \
	  $(CARGO) run --quiet -p wsdr-lab --bin wsdr -- smoke $$token \
	    --target "$(PRIMARY_REGION)=$$primary" --target "$(SECONDARY_REGION)=$$secondary" --target "$$global"; \
	fi

# ---------------------------------------------------------------- rehearse
## rehearse: after both deploys, the failover decision proves itself without moving a user
## (docs/DEPLOY.md, "Rehearse"): every check the records need healthy, then the rehearsal pair
## (rehearsal.<DOMAIN>) forced to fail over and back, timed as this machine's resolver sees
## it; report in target/wsdr/rehearsal.json. With LAB=host:port: against a running `wsdr lab`.
rehearse:
	@if [ -n "$(LAB)" ]; then \
	  $(CARGO) run --quiet -p wsdr-lab --bin wsdr -- rehearse --lab "$(LAB)"; \
	else \
	  out() { aws cloudformation describe-stacks --region "$$1" --stack-name "$$2" \
	    --query "Stacks[0].Outputs[?OutputKey=='$$3'].OutputValue" --output text; }; \
	  s() { out $(SECONDARY_REGION) wsdr-secondary "$$1"; }; \
	  name=$$(s RehearsalName); \
	  [ -n "$$name" ] && [ "$$name" != None ] || \
	    { echo "no rehearsal pair: deploy the secondary with HealthCheckType=endpoint and Rehearsal=on"; exit 1; }; \
	  $(CARGO) run --quiet --release -p wsdr-lab --bin wsdr -- rehearse --aws \
	    --primary-region $(PRIMARY_REGION) --secondary-region $(SECONDARY_REGION) \
	    --state-table "$$(out $(PRIMARY_REGION) wsdr-primary StateTableName)" \
	    --primary-api-id "$$(out $(PRIMARY_REGION) wsdr-primary ApiId)" \
	    --check "PrimaryVerdictCheck=$$(s PrimaryVerdictCheckId)" \
	    --check "PrimarySelfCheck=$$(s PrimarySelfCheckId)" \
	    --check "SecondaryHealthCheck=$$(s SecondaryHealthCheckId)" \
	    --check "RehearsalVerdictCheck=$$(s RehearsalVerdictCheckId)" \
	    --check "RehearsalSelfCheck=$$(s RehearsalSelfCheckId)" \
	    --rehearsal-name "$$name" \
	    --primary-target "$$(out $(PRIMARY_REGION) wsdr-primary RegionalDomainName)" \
	    --secondary-target "$$(s RegionalDomainName)"; \
	fi

# ---------------------------------------------------------------- planned evacuation
# make evacuate FROM=primary|secondary: take that Region out of DNS (its failover record's
# health check inverted), wait until Route 53 itself answers the other Region (TestDNSAnswer,
# at most EVACUATE_DNS_TIMEOUT seconds) and one TTL more, then
# invoke the Region's evacuator (every connection told to move, paced to the other Region's
# quota) and print its report. make restore FROM=... puts the Region back in DNS. For a
# failover already decided by the alarm, KEEP_DNS=1 skips the DNS step (do not invert a check
# that is already unhealthy). With FailoverControl=region-switch, run the Region switch plan
# instead of the DNS step.
FROM ?= primary
DNS_TTL ?= 20
ALIAS_RECORDS ?= false
EVACUATE_DNS_TIMEOUT ?= 300
from_region = $(if $(filter secondary,$(FROM)),$(SECONDARY_REGION),$(PRIMARY_REGION))
to_region = $(if $(filter secondary,$(FROM)),$(PRIMARY_REGION),$(SECONDARY_REGION))
health_check_output = $(if $(filter secondary,$(FROM)),SecondaryHealthCheckId,PrimaryHealthCheckId)
destination_check_output = $(if $(filter secondary,$(FROM)),PrimaryHealthCheckId,SecondaryHealthCheckId)
secondary_out = $$(aws cloudformation describe-stacks --region $(SECONDARY_REGION) --stack-name wsdr-secondary \
	--query "Stacks[0].Outputs[?OutputKey=='$(1)'].OutputValue" --output text)
evacuate:
	@[ -n "$(DOMAIN)" ] && [ -n "$(HOSTED_ZONE_ID)" ] || { echo "set DOMAIN and HOSTED_ZONE_ID (docs/DEPLOY.md)"; exit 1; }
	@set -e; if [ -z "$(KEEP_DNS)" ]; then \
	  dest=$(call secondary_out,$(destination_check_output)); \
	  scripts/health-check-healthy.sh "$$dest" || \
	    { echo "$(to_region)'s health check is not healthy: Route 53 would keep answering $(from_region); nothing changed"; exit 1; }; \
	  check=$(call secondary_out,$(health_check_output)); \
	  target=$$(aws cloudformation describe-stacks --region $(to_region) --stack-name wsdr-$(if $(filter secondary,$(FROM)),primary,secondary) \
	    --query "Stacks[0].Outputs[?OutputKey=='RegionalDomainName'].OutputValue" --output text); \
	  if [ "$(ALIAS_RECORDS)" = true ]; then type=A; \
	    expected=$$(getent ahostsv4 "$$target" | awk '{print $$1}' | sort -u | tr '\n' ' '); \
	  else type=CNAME; expected=$$target; fi; \
	  echo "taking $(from_region) out of DNS (health check $$check inverted)"; \
	  aws route53 update-health-check --health-check-id "$$check" --inverted >/dev/null; \
	  scripts/wait-for-dns-answer.sh "$(HOSTED_ZONE_ID)" "$(DOMAIN)" $$type "$$expected" $(EVACUATE_DNS_TIMEOUT) || \
	    { echo "Route 53 never answered $(to_region) ($$target); nobody was moved. make restore FROM=$(FROM) puts $(from_region) back"; exit 1; }; \
	  echo "Route 53 now answers $(to_region); waiting one TTL ($(DNS_TTL) s) for resolvers"; sleep $(DNS_TTL); \
	fi
	@fn=$$(aws cloudformation describe-stacks --region $(from_region) --stack-name wsdr-$(FROM) \
	  --query "Stacks[0].Outputs[?OutputKey=='EvacuatorFunctionName'].OutputValue" --output text); \
	aws lambda invoke --region $(from_region) --function-name "$$fn" --cli-binary-format raw-in-base64-out \
	  --payload '{"to":"$(to_region)","reason":"$(or $(REASON),maintenance)"}' target/evacuation-report.json >/dev/null && \
	cat target/evacuation-report.json && echo

## restore: put a Region taken out by make evacuate back in DNS (its health check no longer inverted)
restore:
	aws route53 update-health-check --health-check-id $(call secondary_out,$(health_check_output)) --no-inverted >/dev/null
	@echo "$(from_region) back in DNS once its health check reports healthy"

# ---------------------------------------------------------------- optional: ARC Region switch
# FAILOVER_CONTROL=region-switch (or alarm-and-region-switch) on deploy-secondary hands the
# failover records to the plan's health checks (docs/DEPLOY.md, "ARC Region switch").
REGION_SWITCH_STACK ?= wsdr-region-switch
REGION_SWITCH_PLAN_NAME ?= wsdr
plan_arn = $$(aws cloudformation describe-stacks --region $(SECONDARY_REGION) --stack-name $(REGION_SWITCH_STACK) \
	--query "Stacks[0].Outputs[?OutputKey=='PlanArn'].OutputValue" --output text)
plan_check = $$(aws arc-region-switch list-route53-health-checks --region $(SECONDARY_REGION) --plan-arn $(plan_arn) \
	--query "healthChecks[?region=='$(1)'].healthCheckId | [0]" --output text)
REGION_SWITCH_PARAMS = $(if $(filter-out alarm,$(FAILOVER_CONTROL)),FailoverControl=$(FAILOVER_CONTROL) \
	RegionSwitchPrimaryHealthCheckId=$(call plan_check,$(PRIMARY_REGION)) \
	RegionSwitchSecondaryHealthCheckId=$(call plan_check,$(SECONDARY_REGION)))

## deploy-region-switch: the Region switch plan over the failover records (after both stacks;
## optional CUSTOM_ACTION_FUNCTION_ARN), in the secondary's Region like the failover decision
deploy-region-switch:
	@[ -n "$(DOMAIN)" ] && [ -n "$(HOSTED_ZONE_ID)" ] || { echo "set DOMAIN and HOSTED_ZONE_ID (docs/DEPLOY.md)"; exit 1; }
	aws cloudformation deploy --region $(SECONDARY_REGION) --stack-name $(REGION_SWITCH_STACK) \
	  --template-file arc/region-switch.yaml --capabilities CAPABILITY_IAM \
	  $(if $(CFN_ROLE_ARN),--role-arn $(CFN_ROLE_ARN)) \
	  --parameter-overrides PlanName=$(REGION_SWITCH_PLAN_NAME) PrimaryRegion=$(PRIMARY_REGION) \
	  SecondaryRegion=$(SECONDARY_REGION) HostedZoneId=$(HOSTED_ZONE_ID) DomainName=$(DOMAIN) \
	  $(if $(CUSTOM_ACTION_FUNCTION_ARN),CustomActionFunctionArn=$(CUSTOM_ACTION_FUNCTION_ARN)) \
	  $(if $(PERMISSIONS_BOUNDARY_ARN),PermissionsBoundaryArn=$(PERMISSIONS_BOUNDARY_ARN))

## region-switch-health-checks: the health check per Region that the plan created
region-switch-health-checks:
	@echo "$(PRIMARY_REGION): $(call plan_check,$(PRIMARY_REGION))"
	@echo "$(SECONDARY_REGION): $(call plan_check,$(SECONDARY_REGION))"

## destroy: secondary first (it holds the records pointing at the primary), then primary.
## The Global Table is retained (DeletionPolicy: Retain); delete it by hand when sure.
destroy:
	$(SAM) delete --no-prompts --stack-name wsdr-secondary --region $(SECONDARY_REGION)
	$(SAM) delete --no-prompts --stack-name wsdr-primary --region $(PRIMARY_REGION)

## demo: the main job: the reference game day (50 users) under the reference design and under wsdr's defaults, one time axis.
## The `demo` profile and no DynamoDB/TLS features: the quickest cold build (docs/LAB.md).
demo:
	$(CARGO) run --quiet --profile demo -p wsdr-lab --no-default-features --bin wsdr -- drill --scenario throttle --users 50 --compare-reference --clock simulated --real-beside 20

## lab: the long-running lab with the live auction and control room (http://127.0.0.1:8787/);
## LAB_ARGS="--users 20" adds simulated users. The binary stays at target/demo/wsdr.
LAB_ARGS ?= --users 20
lab:
	$(CARGO) run --quiet --profile demo -p wsdr-lab --no-default-features --bin wsdr -- lab $(LAB_ARGS)

## bench: every benchmark in one run (release build); rewrites BENCHMARKS.md.
## Uses cargo-lambda for the arm64 bootstrap sizes when it is installed (see docs/DEPLOY.md).
bench:
	@if command -v cargo-lambda >/dev/null 2>&1; then $(MAKE) package; else rm -rf target/lambda; fi
	$(CARGO) build --release --bin ws-handler --bin authorizer --bin canary --bin lambda-anchor -p ws-handler -p authorizer -p canary -p lambda-anchor
	scripts/with-dynamodb-local.sh $(CARGO) run --release -p wsdr-bench -- all $(ARGS)

clean:
	$(CARGO) clean
