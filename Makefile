# agentfsm: every target creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.DEFAULT_GOAL := help
.PHONY: help install demo lint typecheck test test-deep check bench diagrams docs

help: ## List the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,litellm,ray,integrations,durable,otel,cedar]'
	@touch $@

# The demo needs litellm only: a newcomer's first command does not install Ray, DBOS,
# the four frameworks and Playwright. `install` (and every target below) adds the rest.
$(VENV)/.demo-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[litellm]'
	@touch $@

install: $(VENV)/.installed ## Create .venv and install agentfsm with its dev, litellm, ray, integrations, durable, otel and cedar extras

demo: $(VENV)/.demo-installed ## Run the weather agent end to end (local server, no key), then draw the machine
	$(PY) -m agentfsm demo
	$(PY) -m agentfsm diagram

lint: install ## Lint and format check (ruff)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install ## Type check, strict (mypy)
	$(VENV)/bin/mypy

test: install ## Run the test suite (pytest + hypothesis, the quick profile)
	$(PY) -m pytest

test-deep: install ## Run the property tests again with many more examples (CI does)
	$(PY) -m pytest -q -m hypothesis --hypothesis-profile=deep

check: lint typecheck test ## Lint, type check and test

BENCH_VENV ?= .venv-bench

$(BENCH_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[bench,litellm]'
	@touch $@

bench: $(BENCH_VENV)/.installed ## Benchmarks (own venv with the peer frameworks); writes bench/RESULTS*.md
	$(BENCH_VENV)/bin/python bench/run.py
	$(BENCH_VENV)/bin/python bench/bench_normalize.py
	$(BENCH_VENV)/bin/python bench/bench_replay.py
	$(MAKE) install
	$(PY) bench/bench_integrations.py

diagrams: install ## Regenerate the committed diagrams/ from the route table
	$(PY) -m agentfsm diagram --format mermaid -o diagrams/machine.mmd
	$(PY) -m agentfsm diagram --format dot -o diagrams/machine.dot
	@if command -v dot >/dev/null; then $(PY) -m agentfsm diagram --format svg -o diagrams/machine.svg; \
	else echo "Graphviz 'dot' not installed: skipped diagrams/machine.svg (apt-get install graphviz)"; fi

docs: install ## Regenerate docs/reference.md, docs/api.md and the checkpoint and policy schemas
	$(PY) docs/gen_reference.py
	$(PY) docs/gen_api.py
	$(PY) docs/gen_checkpoint_schema.py
	$(PY) docs/gen_policy_schema.py
