# intentgate developer entry points. `make help` lists the targets.
# Needs only go and python3 on PATH; Python tools go into project virtualenvs.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The pinned Python packages need Python 3.11 or later (joserfc, which
# moto[server] needs, requires it). PYTHON is the first of PYTHON_CANDIDATES
# that is recent enough (so a machine whose python3 is older but that has a
# python3.12, say, needs nothing more); each virtualenv recipe refuses an
# older one with a clear message. Expanded only when a virtualenv is built.
PYTHON_MIN := 3.11
PYTHON_CANDIDATES ?= python3 python3.14 python3.13 python3.12 python3.11
python_ok = $(1) -c 'import sys; sys.exit(sys.version_info < ($(subst .,$(comma) ,$(PYTHON_MIN))))' >/dev/null 2>&1
comma := ,
PYTHON ?= $(or $(firstword $(foreach p,$(PYTHON_CANDIDATES),$(if $(shell $(call python_ok,$(p)) && echo ok),$(p)))),python3)
define check_python
@$(call python_ok,$(PYTHON)) || { echo "make: the Python tooling (local engine, cfn-lint/sam, MCP client) needs Python $(PYTHON_MIN) or later;" \
	"none of $(PYTHON_CANDIDATES) is ($(PYTHON): $$($(PYTHON) --version 2>&1 || echo not found))." \
	"Install one, or name it: make PYTHON=/path/to/python3.12 ..." >&2; exit 1; }
endef
GO ?= go

ENGINE_DIR := infra/engine
VENV := .venv
VENV_STAMP := $(VENV)/.installed
TOOLS_VENV := .venv-tools
TOOLS_STAMP := $(TOOLS_VENV)/.installed
PIP_FLAGS := --disable-pip-version-check --no-input -q

# Port for `make engine`.
ENGINE_PORT ?= 8000
GO_TEST_FLAGS ?= -count=1 -timeout 10m
MODULE := github.com/intentgate/intentgate
# Extra prerequisites of `make test`: the SAM template is linted and built.
TEST_EXTRA_DEPS ?= template

# Directories gofmt must not walk into.
GOFMT_PRUNE = -path ./.git -o -path ./$(VENV) -o -path ./$(TOOLS_VENV) -o -path ./.build \
	-o -path ./.aws-sam -o -path ./.devstack -o -path ./node_modules -o -path ./$(CLIENTS_VENV) -o -path ./$(CLIENTS_DIR)/node_modules

LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath

# MCP clients the client tests drive (test/clients): node packages pinned by
# package-lock.json (with the Node 22 runtime) and the Python SDK client.
CLIENTS_DIR := test/clients
CLIENTS_NODE_STAMP := $(CLIENTS_DIR)/node_modules/.installed
CLIENTS_VENV := .venv-clients
CLIENTS_VENV_STAMP := $(CLIENTS_VENV)/.installed
NPM ?= npm

.PHONY: help venv test fmt-check vet schemas go-test test-engine run build engine clean distclean template rie

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(VENV_STAMP) $(TOOLS_STAMP) ## Create the Python virtualenvs (.venv engine, .venv-tools cfn-lint/sam); redone only when requirements change

# Each virtualenv is rebuilt from scratch when its requirements change, so
# no package from an older pin set lingers. The stamp is written last: an
# interrupted install is redone on the next run. A virtualenv whose python
# no longer runs or no longer finds its packages (the interpreter it was
# made from was upgraded or removed) is rebuilt too, whatever its stamp says:
# otherwise the engine's "run make venv" would find nothing to do. The check
# looks the package up without importing it (~20 ms).
venv_broken = $(shell $(1)/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("$(2)") is None)' \
	>/dev/null 2>&1 || echo venv-rebuild)
.PHONY: venv-rebuild
venv-rebuild:

$(VENV_STAMP): $(ENGINE_DIR)/requirements.txt $(ENGINE_DIR)/constraints.txt $(call venv_broken,$(VENV),moto)
	$(check_python)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install $(PIP_FLAGS) -r $(ENGINE_DIR)/requirements.txt
	touch $@

$(TOOLS_STAMP): $(ENGINE_DIR)/requirements-tools.txt $(ENGINE_DIR)/constraints-tools.txt $(call venv_broken,$(TOOLS_VENV),cfnlint)
	$(check_python)
	rm -rf $(TOOLS_VENV)
	$(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/python -m pip install $(PIP_FLAGS) -r $(ENGINE_DIR)/requirements-tools.txt
	touch $@

# Whole-system tests that load the machine themselves (the devstack's 1,000
# writes and replay storm at the default budgets, the fault campaign, four
# real clients) run one package at a time after the rest: on two cores the
# other packages' load would otherwise be what they measure.
LOAD_TEST_PKGS := ./infra/devstack ./internal/chaos ./test/clients

test: venv client-deps fmt-check vet $(TEST_EXTRA_DEPS) ## What CI runs: gofmt check, go vet, template lint + sam build, every Go test (four real MCP clients and a 300-operation fault campaign among them; local engine: moto)
	$(GO) test $(GO_TEST_FLAGS) $$($(GO) list ./... | grep -v -x $(foreach p,$(LOAD_TEST_PKGS),-e '$(MODULE)/$(p:./%=%)'))
	$(GO) test $(GO_TEST_FLAGS) -p 1 $(LOAD_TEST_PKGS)

fmt-check: ## Fail if any Go file is not gofmt-formatted
	@files=$$(find . \( $(GOFMT_PRUNE) \) -prune -o -name '*.go' -type f -print | xargs -r gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi

vet: ## go vet ./...
	$(GO) vet ./...

# Tools serve schemas committed as JSON under <package>/schemas/, generated
# from the Go types (internal/committedschema); each such package's
# TestCommittedSchemasAreGeneratedFromTheTypes fails `make test` when one is
# stale and rewrites them here. Some of these packages start the engine.
schemas: $(VENV_STAMP) ## Regenerate the committed tool schemas (<package>/schemas/*.json) from the Go types
	INTENTGATE_UPDATE_SCHEMAS=1 $(GO) test -count=1 -run '^TestCommittedSchemasAreGeneratedFromTheTypes$$' \
		$$(find internal -type d -name schemas -printf './%h\n' | sort -u)

# Without an engine setting this falls back to the local moto engine.
test-engine: $(if $(INTENTGATE_DYNAMODB_ENDPOINT)$(INTENTGATE_ENGINE_KIND),,$(VENV_STAMP)) ## Contract + store tests against INTENTGATE_DYNAMODB_ENDPOINT (or INTENTGATE_ENGINE_KIND=dynamodb)
	$(GO) test $(GO_TEST_FLAGS) ./internal/enginecontract/... ./internal/store/...

run: $(VENV_STAMP) ## Run the whole system locally on 127.0.0.1:8080, writing .devstack/env (ARGS="-addr 127.0.0.1:9090" to move it, "-sweep 5s"; ARGS=-h lists the flags)
	$(GO) run ./infra/devstack $(ARGS)

template: $(TOOLS_STAMP) ## cfn-lint template.yaml and its SAM expansion, sam build all four functions (no container)
	INTENTGATE_TOOLS_VENV=$(TOOLS_VENV) ./infra/sam/check.sh

rie: ## Install the Lambda Runtime Interface Emulator into .build/bin (test/rie installs it itself when missing)
	./infra/rie/install.sh

build: ## Build the MCP and reconciler bootstraps (linux/arm64) into .build/ (make template builds what sam deploys)
	$(LAMBDA_BUILD) -o .build/mcp/bootstrap ./functions/mcp
	$(LAMBDA_BUILD) -o .build/reconciler/bootstrap ./functions/reconciler

engine: $(VENV_STAMP) ## Serve the local engine in the foreground on 127.0.0.1:8000 (ENGINE_PORT=...)
	$(VENV)/bin/python $(ENGINE_DIR)/moto_server.py --host 127.0.0.1 --port $(ENGINE_PORT)

clean: ## Remove build outputs and devstack state
	rm -rf .build .aws-sam .devstack

distclean: clean ## Also remove the Python virtualenvs and the installed MCP clients
	rm -rf $(VENV) $(TOOLS_VENV) $(CLIENTS_VENV) $(CLIENTS_DIR)/node_modules

# ---------------------------------------------------------------- engine benchmark
.PHONY: bench-engine
bench-engine: $(VENV_STAMP) ## Transaction, due-index Query and wide-item GetItem/GetRecords/UpdateItem latency at 100/1,000/10,000 items: stock moto vs the patched launcher, with ratios (BENCH_ARGS="-samples 15", "-part wide")
	$(GO) run ./infra/engine/bench $(BENCH_ARGS)

# --- MCP clients and conformance (test/clients) ---------------------------

.PHONY: client-deps conformance

client-deps: $(CLIENTS_NODE_STAMP) $(CLIENTS_VENV_STAMP) ## Install the pinned MCP clients: npm into test/clients, the Python SDK into .venv-clients

# `npm install --no-save` installs exactly what package-lock.json pins. Not
# `npm ci`: it refuses this lock because an optional, Windows-only package
# of vite (pulled in by the Inspector) is not served by every registry, so
# the lock cannot list it.
$(CLIENTS_NODE_STAMP): $(CLIENTS_DIR)/package.json $(CLIENTS_DIR)/package-lock.json
	$(NPM) install --no-save --prefix $(CLIENTS_DIR) --no-audit --no-fund --loglevel=error
	touch $@

# The MCP conformance suite's tools-only scenarios, at 2026-07-28, against the
# MCP function over plain HTTP and under the Lambda Runtime Interface
# Emulator behind the local API Gateway front; prints both scores side by
# side and fails if the adapter changes any check's outcome.
conformance: $(VENV_STAMP) client-deps ## Run the MCP conformance suite over plain HTTP and through the Lambda adapter; print the scores
	INTENTGATE_CONFORMANCE=1 $(GO) test -count=1 -timeout 30m -v \
		-run '^TestConformanceSuiteScoresTheSameOverHTTPAndThroughTheAdapter$$' ./test/rie/ \
		| grep -v -e '^=== ' -e '^--- PASS' -e '^PASS$$'

$(CLIENTS_VENV_STAMP): $(CLIENTS_DIR)/python/requirements.txt $(CLIENTS_DIR)/python/constraints.txt $(call venv_broken,$(CLIENTS_VENV),mcp)
	$(check_python)
	rm -rf $(CLIENTS_VENV)
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/python -m pip install $(PIP_FLAGS) -r $(CLIENTS_DIR)/python/requirements.txt
	touch $@

# ---------------------------------------------------------------- deploy
# One-command deployment to a real AWS account (docs/deploy.md). The first
# run asks its questions and remembers the answers in .deploy/<stack>.json.
# ARGS: -stack NAME -region REGION -guided (ask again) -yes (CI: never ask).
.PHONY: deploy destroy
deploy: $(TOOLS_STAMP) ## Deploy to AWS (first run guided; ARGS="-stack intentgate-prod -region eu-west-1"; ARGS=-h lists the flags)
	$(GO) run ./infra/deploy -venv $(TOOLS_VENV) $(ARGS)

destroy: $(TOOLS_STAMP) ## Delete the stack (ARGS="-stack ..."); the operations table is retained
	$(GO) run ./infra/deploy -destroy -venv $(TOOLS_VENV) $(ARGS)

# ---------------------------------------------------------------- cold start
# Ours vs a bare go-sdk MCP Lambda (infra/bench/baremcp) under the Lambda
# Runtime Interface Emulator, side by side in one run (test/rie installs the
# emulator). INTENTGATE_BENCH_ROUNDS / _WARM change the sample sizes;
# INTENTGATE_BENCH_BASELINE=<bootstrap> adds another build to the same rounds.
.PHONY: bench-coldstart
bench-coldstart: $(VENV_STAMP) ## Cold start, first/warm invoke, RSS and size: intentgate vs bare go-sdk MCP Lambda
	INTENTGATE_BENCH_COLDSTART=1 $(GO) test -count=1 -timeout 20m -run '^TestColdStartSideBySide$$' -v ./test/rie \
		| grep -v -e '^=== ' -e '^--- ' -e '^PASS$$' -e '^ok '

# --- cost of bad input (docs/design.md, "Cost of bad input") ----------------
.PHONY: bench-input
BENCH_INPUT_TIME ?= 1s

bench-input: ## Server CPU of refusing hostile bodies vs a normal valid call, side by side (ratios)
	@$(GO) test -count=1 -run '^$$' -bench '^BenchmarkInput$$' -benchtime $(BENCH_INPUT_TIME) ./internal/mcpserver/ \
	| awk '/^BenchmarkInput\// { \
		name = $$1; sub(/^BenchmarkInput\//, "", name); sub(/-[0-9]+$$/, "", name); \
		for (i = 2; i < NF; i++) { if ($$(i+1) == "cpu-ms/op") cpu[name] = $$i; if ($$(i+1) == "ns/op") wall[name] = $$i } \
		order[++n] = name } \
	/^(FAIL|ok|PASS|panic)/ { print > "/dev/stderr" } \
	END { if (!("valid_call" in cpu)) { print "bench-input: no baseline figure" > "/dev/stderr"; exit 1 } \
		printf "%-36s %14s %14s %18s\n", "request", "cpu ms/op", "wall ms/op", "cpu vs valid_call"; \
		for (i = 1; i <= n; i++) { k = order[i]; \
			printf "%-36s %14.3f %14.3f %17.2fx\n", k, cpu[k], wall[k] / 1e6, cpu[k] / cpu["valid_call"] } }'

# --- visibility: what refusing costs (docs/design.md, "Visibility") ---------
.PHONY: bench-visibility
BENCH_VISIBILITY_N ?= 60x

bench-visibility: $(VENV_STAMP) ## get_operation on an unknown, a foreign and the caller's own operation: time and store calls side by side
	@$(GO) test -count=1 -run '^$$' -bench '^BenchmarkGetOperation$$' -benchtime $(BENCH_VISIBILITY_N) ./internal/gateway/ \
	| awk '/^BenchmarkGetOperation/ { for (i = 2; i < NF; i++) { u = $$(i+1); \
		if (u ~ /-ms\/op$$/) { k = u; sub(/-ms\/op$$/, "", k); ms[k] = $$i } \
		if (u ~ /-store-calls\/op$$/) { k = u; sub(/-store-calls\/op$$/, "", k); sc[k] = $$i } } } \
	/^(FAIL|ok|PASS|panic)/ { print > "/dev/stderr" } \
	END { if (!("unknown" in ms)) { print "bench-visibility: no baseline figure" > "/dev/stderr"; exit 1 } \
		printf "%-10s %12s %14s %16s\n", "operation", "ms/call", "store calls", "time vs unknown"; \
		split("unknown foreign own", order, " "); \
		for (i = 1; i <= 3; i++) { k = order[i]; printf "%-10s %12.2f %14.1f %15.2fx\n", k, ms[k], sc[k], ms[k] / ms["unknown"] } }'

# Throughput of the safety boundary (docs/capacity.md): the write path's
# operations per second against the engine's own raw conditional-write rate,
# measured in alternating rounds of the same run, plus the DynamoDB requests
# each path makes. THROUGHPUT_ARGS="-rounds 5 -workers 8" to change the load.
.PHONY: bench-throughput
bench-throughput: $(VENV_STAMP) ## Print write-path ops/s vs the engine's raw conditional writes (ratio) and requests per path
	$(GO) test -count=1 -timeout 20m -v -run 'TestDynamoDBRequestsPerPath|TestThroughputFigure' ./test/throughput -args -throughput $(THROUGHPUT_ARGS) \
		| grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS'

# Seeded fault campaign with an invariant checker (docs/chaos.md).
# SEED=0 draws a seed and prints it; CHAOS_ARGS passes further flags
# (go run ./infra/chaos -h lists them with their defaults).
SEED ?= 0
OPS ?= 10000
CHAOS_ARGS ?=
.PHONY: chaos
chaos: $(VENV_STAMP) ## Fault campaign: SEED=… OPS=… (default 10000), CHAOS_ARGS="-skew 200ms ..."; prints the summary table
	$(GO) run ./infra/chaos -seed $(SEED) -ops $(OPS) $(CHAOS_ARGS)
