# wsdr: the two commands that matter are `make demo` and `make test`.
# Every target installs what it needs, idempotently, so both work on a fresh machine.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
TOOLS := $(CURDIR)/.tools

.PHONY: all test unit fmt fmt-check lint clippy demo bench clean tools

all: test

## test: formatting, lints, every test (with DynamoDB Local started and stopped around them)
test: fmt-check clippy unit

unit:
	scripts/with-dynamodb-local.sh $(CARGO) test --workspace --all-targets

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

lint: fmt-check clippy

## demo: the main job (a local two-Region scenario; the full lab drill once it exists)
demo:
	$(CARGO) run --release --quiet -p wsdr-core --example two_regions

## bench: benchmarks; rewrites BENCHMARKS.md
bench:
	@echo "benchmarks arrive with the lab (issue: Benchmarks)"; exit 1

clean:
	$(CARGO) clean
