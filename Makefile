# pgwake — every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install system-deps browser-deps run test test-browser test-reliability fuzz bench bench-smoke lint fmt clean

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install pgwake with test and lint tools

# Debian's pgbouncer for the transaction-pooler scenario (tests/reliability). Installed
# when missing and this is a root shell with apt; otherwise that one test says so.
system-deps: ## Install the Debian packages the tests use (pgbouncer), if possible
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's pgbouncer"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer >/dev/null || \
	    { apt-get update -q >/dev/null && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer >/dev/null; }; \
	  else echo "pgbouncer is not installed; its test will be skipped (apt-get install pgbouncer)"; fi; }

# The admin calendar's browser test: Debian's chromium (installed when missing and this
# is a root shell with apt), Playwright for Python (never its own browser download) and
# axe-core from npm.
browser-deps: ## Install Debian's chromium for make test-browser, if possible
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null || \
	    { apt-get update -q >/dev/null && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	  else echo "chromium is not installed and cannot be (apt-get install chromium as root)"; fi; }

BROWSER_STAMP := $(VENV)/.browser-installed
$(BROWSER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,lint,browser]'
	touch $@

AXE_STAMP := tests/browser/node_modules/.installed
$(AXE_STAMP): tests/browser/package.json tests/browser/package-lock.json
	npm ci --prefix tests/browser --no-audit --no-fund --silent
	touch $@

run: $(STAMP) ## Serve HTTP + runner (embedded PostgreSQL when DATABASE_URL is unset)
	@$(BIN)/pgwake serve

test: $(STAMP) system-deps ## Run the test suite (TEST_DATABASE_URL, else Docker, else embedded PostgreSQL)
	$(BIN)/python -m pytest -q

test-browser: $(STAMP) $(BROWSER_STAMP) $(AXE_STAMP) browser-deps ## The admin calendar in headless Chromium (Playwright + axe-core)
	PGWAKE_BROWSER=1 $(BIN)/python -m pytest -q tests/browser

test-reliability: $(STAMP) system-deps ## The fault scenarios at full size (about 20 min)
	PGWAKE_RELIABILITY=full $(BIN)/python -m pytest -q -s tests/reliability

fuzz: $(STAMP) ## Longer schemathesis run over every operation (300 cases each, random seed)
	PGWAKE_FUZZ_EXAMPLES=300 PGWAKE_FUZZ_SEED=random $(BIN)/python -m pytest -q -s tests/e2e/test_fuzz.py

PEERS := bench/.venv-peers
$(PEERS)/.installed: bench/requirements-peers.txt
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet -r bench/requirements-peers.txt
	touch $@

bench: $(STAMP) $(PEERS)/.installed ## pgwake vs PgQueuer vs Procrastinate (BENCH_DATABASE_URL; see bench/README.md)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-smoke: $(STAMP) $(PEERS)/.installed ## The bench harness at tiny sizes (CI: it works, not the numbers)
	$(BIN)/python bench/run.py --smoke --out bench/results/smoke.json

# The bench files that run in the project venv (the peers' drivers import PgQueuer and
# Procrastinate, installed only in bench/.venv-peers).
BENCH_TYPED := bench/run.py bench/systems/common.py bench/systems/pgwake_driver.py \
               bench/systems/pgbench_limit_driver.py

lint: $(STAMP) ## ruff + mypy --strict
	$(BIN)/ruff check service tests bench docs
	$(BIN)/ruff format --check service tests bench docs
	$(BIN)/mypy
	$(BIN)/mypy --strict $(BENCH_TYPED)

fmt: $(STAMP) ## Format and autofix
	$(BIN)/ruff format service tests bench docs
	$(BIN)/ruff check --fix service tests bench docs

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) $(PEERS) tests/browser/node_modules .pytest_cache .mypy_cache .ruff_cache
