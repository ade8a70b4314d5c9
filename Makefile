# outlast: every habit is a target. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help
help: ## Show the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

.PHONY: install
install: $(STAMP) ## Create .venv and install outlast with its dev tools (automatic for other targets)

.PHONY: test
test: $(STAMP) ## Run every test layer with the coverage floor (the README's test command)
	$(BIN)/python -m pytest --cov --cov-report=term $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: $(STAMP) ## Unit tests only (fakes, sockets blocked)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: $(STAMP) ## Integration tests only (handlers and adapters against moto)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

.PHONY: lint
lint: $(STAMP) ## ruff (lint + format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy shared functions infra outlast tests

.PHONY: fmt
fmt: $(STAMP) ## Format and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: openapi
openapi: $(STAMP) ## Regenerate docs/openapi.json from the code
	$(BIN)/python -m outlast.openapi > docs/openapi.json

.PHONY: clean
clean: ## Remove build outputs and caches (keeps .venv)
	rm -rf cdk.out build .pytest_cache .mypy_cache .ruff_cache .coverage htmlcov
