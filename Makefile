# agentfsm: every target creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.DEFAULT_GOAL := help
.PHONY: help install mcp-servers demo lint typecheck test test-deep check bench diagrams docs

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

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

# Real MCP servers that no one here wrote, for the proxy's tests (tests/cli/
# test_mcp_proxy_real_servers.py): the filesystem server from npm and the git server from
# PyPI, each at the version pinned in .ci/mcp-servers, in the gitignored .cache/mcp-servers.
# The git server gets a venv of its own, so its dependencies never move ours.
MCP_SERVERS ?= .cache/mcp-servers
MCP_PINS    := .ci/mcp-servers

$(MCP_SERVERS)/.installed: $(MCP_PINS)/package.json $(MCP_PINS)/package-lock.json $(MCP_PINS)/git-requirements.txt
	@command -v npm >/dev/null || { echo "make mcp-servers: npm not found; install Node.js 20 or later (it brings npm)" >&2; exit 1; }
	mkdir -p $(MCP_SERVERS)
	cp $(MCP_PINS)/package.json $(MCP_PINS)/package-lock.json $(MCP_SERVERS)/
	npm ci --prefix $(MCP_SERVERS) --no-audit --no-fund --silent
	$(PYTHON) -m venv $(MCP_SERVERS)/git
	$(MCP_SERVERS)/git/bin/python -m pip install --quiet --disable-pip-version-check -r $(MCP_PINS)/git-requirements.txt
	@touch $@

mcp-servers: $(MCP_SERVERS)/.installed ## Install the MCP servers the proxy's tests start (npm's filesystem server, PyPI's git server)

demo: $(VENV)/.demo-installed ## Run the weather agent end to end (local server, no key), then draw the machine
	$(PY) -m agentfsm demo
	$(PY) -m agentfsm diagram

lint: install ## Lint and format check (ruff)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install ## Type check, strict (mypy)
	$(VENV)/bin/mypy

test: install mcp-servers ## Run the test suite (pytest + hypothesis, the quick profile)
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
