# outlast: every habit is a target. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Lambda runtime's Python minor version (.python-version, which also makes pyenv's shims select
# it here): the venv, the tests, local mode and the layer build all run it. PYTHON=... overrides.
PYTHON_VERSION := $(shell cat .python-version)
PYTHON ?= python$(PYTHON_VERSION)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements/dev.txt
# True when the given interpreter runs and is Python $(PYTHON_VERSION).
is_runtime_python = "$(1)" -c 'import sys; sys.exit(f"{sys.version_info[0]}.{sys.version_info[1]}" != "$(PYTHON_VERSION)")' 2>/dev/null
NODE_STAMP := node_modules/.installed
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help
help: ## Show the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml $(LOCK) .python-version
	@$(call is_runtime_python,$(PYTHON)) || { \
	  echo "error: need Python $(PYTHON_VERSION), the Lambda runtime's version, as '$(PYTHON)' (it is missing or another version)."; \
	  echo "  With pyenv: 'pyenv install $(PYTHON_VERSION)' (.python-version selects it here); or: make PYTHON=/path/to/python$(PYTHON_VERSION)"; \
	  exit 1; }
	@if test -x $(BIN)/python && ! $(call is_runtime_python,$(BIN)/python); then \
	  echo "$(VENV) is not Python $(PYTHON_VERSION): recreating it"; rm -rf $(VENV); fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# Exactly the locked versions, every file hash-checked; then outlast itself, built by the locked setuptools.
	$(BIN)/python -m pip install --quiet --require-hashes --requirement $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation --editable .
	@touch $@

.PHONY: install
install: $(STAMP) ## Create .venv (Python from .python-version) and install the locked requirements/dev.txt (automatic for other targets)

.PHONY: lock
lock: $(STAMP) ## Re-resolve requirements/*.txt with uv (LOCK_ARGS=--upgrade for the newest allowed releases); needs PyPI
	$(BIN)/python -m infra.lock $(LOCK_ARGS)

.PHONY: test
test: $(STAMP) $(NODE_STAMP) ## Every test layer: unit, contract, integration, infra, e2e (browser tests included); coverage floor 85%
	@# Two workers for the layers that run in-process (file by file: a file's fixtures stay together);
	@# the end-to-end layer runs alone, as its stacks already use every core.
	$(BIN)/python -m pytest -n 2 --dist loadfile --cov --cov-report= tests/unit tests/contract tests/integration tests/infra $(PYTEST_ARGS)
	$(BIN)/python -m pytest --cov --cov-append --cov-report=term tests/e2e $(PYTEST_ARGS)

.PHONY: check
check: lint test ## What CI runs: lint, then every test

.PHONY: test-e2e
test-e2e: $(STAMP) $(NODE_STAMP) ## End-to-end tests only (the local stack over real HTTP, the console in Chromium)
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

.PHONY: demo
demo: $(STAMP) ## Start the local system, run a handful of jobs (success, 429 retries, failure, cancel), stop
	$(BIN)/python -m outlast.demo

.PHONY: test-browser
test-browser: $(STAMP) $(NODE_STAMP) ## The console's browser tests only (Debian's chromium, headless; a local stack)
	$(BIN)/python -m pytest tests/e2e/browser $(PYTEST_ARGS)

.PHONY: screenshot
screenshot: $(STAMP) $(NODE_STAMP) ## Make docs/console.png (the README's picture) again from a browser test run
	OUTLAST_SCREENSHOT=$(CURDIR)/docs/console.png $(BIN)/python -m pytest tests/e2e/browser -k screenshot

.PHONY: up
up: $(STAMP) $(NODE_STAMP) ## Run the whole system locally: prints `console: http://127.0.0.1:8001/` and `ready: http://127.0.0.1:8000`; Ctrl-C stops it
	$(BIN)/outlast local up $(UP_ARGS)

.PHONY: test-unit
test-unit: $(STAMP) ## Unit tests only (fakes, sockets blocked)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: $(STAMP) ## Integration tests only (handlers and adapters against moto)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

.PHONY: lint
lint: $(STAMP) $(NODE_STAMP) ## ruff (lint + format check), mypy, and the console's TypeScript (tsc, strict)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy shared functions infra outlast tests
	node_modules/.bin/tsc -p web

.PHONY: fmt
fmt: $(STAMP) ## Format and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: openapi
openapi: $(STAMP) $(NODE_STAMP) ## Regenerate docs/openapi.json from the code, and the console's and the client's types from it
	$(BIN)/python -m outlast.openapi > docs/openapi.json
	node_modules/.bin/openapi-typescript docs/openapi.json -o web/src/api/schema.d.ts
	$(BIN)/python -m outlast.openapi --client-models docs/openapi.json outlast/api/models.py

# --- the web console (web/) ----------------------------------------------------------------------
.PHONY: console
console: $(NODE_STAMP) ## Build the web console with esbuild (offline, from node_modules) into build/console/<hash>
	$(BIN)/python -c 'from infra.console_build import build_console; print(build_console())'

.PHONY: console-types
console-types: $(NODE_STAMP) ## Regenerate web/src/api/schema.d.ts from docs/openapi.json (openapi-typescript; a test checks it)
	node_modules/.bin/openapi-typescript docs/openapi.json -o web/src/api/schema.d.ts

.PHONY: clean
clean: ## Remove build outputs and caches (keeps .venv)
	rm -rf cdk.out cdk.out.* build .local .pytest_cache .mypy_cache .ruff_cache .coverage htmlcov

# --- CDK app (infra/) --------------------------------------------------------------------------
# The pinned CDK CLI from package.json; cdk.json runs `python3 -m infra.app`, so the venv's python
# goes first on PATH. Extra CLI arguments: `make deploy CDK_ARGS="-c stackName=outlast-prod"`.
CDK := node_modules/.bin/cdk
CDK_RUN := PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK)
CDK_ARGS ?=
LOCK_ARGS ?=
TEMPLATE := cdk.out/Outlast.template.json

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

.PHONY: node
node: $(NODE_STAMP) ## Install the pinned AWS CDK CLI from package-lock.json (npm ci)

.PHONY: layers
layers: $(STAMP) ## Build the Lambda layers for arm64 from requirements/layer-*.txt (needs PyPI once; cached in build/layers)
	$(BIN)/python -m infra.packaging

.PHONY: synth
synth: $(STAMP) $(NODE_STAMP) ## Synthesize into cdk.out offline, cdk-nag included (cached layers, else placeholders)
	$(CDK_RUN) synth --quiet -c bundle=auto $(CDK_ARGS)

.PHONY: cfn-lint
cfn-lint: synth ## Lint the synthesized template (W3005: CDK's redundant DependsOn on roles)
	$(BIN)/cfn-lint --ignore-checks W3005 -- $(TEMPLATE)

.PHONY: test-infra
test-infra: $(STAMP) ## Infra tests only (CDK assertions, cdk-nag, cfn-lint)
	$(BIN)/python -m pytest tests/infra $(PYTEST_ARGS)

.PHONY: bootstrap
bootstrap: $(STAMP) $(NODE_STAMP) ## cdk bootstrap: once per AWS account and region (needs credentials)
	$(CDK_RUN) bootstrap $(CDK_ARGS)

.PHONY: diff
diff: $(STAMP) $(NODE_STAMP) ## Compare the app (real layers) with the deployed stack
	$(CDK_RUN) diff -c bundle=true $(CDK_ARGS)

.PHONY: deploy
deploy: $(STAMP) $(NODE_STAMP) ## Build the layers if needed and deploy the stack (needs credentials)
	$(CDK_RUN) deploy -c bundle=true $(CDK_ARGS)

.PHONY: destroy
destroy: $(STAMP) $(NODE_STAMP) ## Delete the stack; retained data stays (docs/deploy.md, "Tear down")
	$(CDK_RUN) destroy -c bundle=auto $(CDK_ARGS)

# --- fault injection -------------------------------------------------------------------------------
JOBS ?= 300
SEED ?= 7
CHAOS_ARGS ?=

.PHONY: chaos
chaos: $(STAMP) ## Chaos run on a local stack: JOBS=300 SEED=7 (CHAOS_ARGS="--json-out r.json"); exits 1 on loss/leak
	$(BIN)/python -m outlast.chaos --jobs $(JOBS) --seed $(SEED) $(CHAOS_ARGS)

# --- Benchmarks (outlast/bench) ----------------------------------------------------------------
BENCH_ARGS ?=

.PHONY: bench
bench: $(STAMP) ## Benchmarks: cost per job, worker concurrency, the token bill per tier, cold starts, pipeline, streaming, documents, noisy neighbour -> docs/benchmarks.{md,json} (BENCH_ARGS="--quick")
	$(BIN)/python -m outlast.bench $(BENCH_ARGS)

.PHONY: fuzz
fuzz: $(STAMP) ## API fuzzing, the long run: schemathesis on the local stack (FUZZ_ARGS="--port 8001 --examples 500")
	$(BIN)/python -m outlast.fuzz $(FUZZ_ARGS)
