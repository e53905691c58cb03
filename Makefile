# evennia-ai: `make demo` plays the offline demo, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test evennia-test bench format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest

# A throwaway Evennia game with the contrib installed, for the demo and `evennia test`.
# The demo migrates it itself, through Django: the launcher's `evennia migrate` loops on
# its superuser prompt when there is no terminal.
GAME_DIR := build/demo_game
GAME_CONFIGURED := $(GAME_DIR)/.ai-configured
EVENNIA := $(abspath $(BIN))/evennia

$(GAME_CONFIGURED): | $(STAMP)
	rm -rf $(GAME_DIR)
	mkdir -p build
	cd build && $(EVENNIA) --init demo_game > /dev/null
	printf '\n# Added by make: the evennia-ai contrib, and a fast hasher for tests.\n%s\n%s\n' \
		'INSTALLED_APPS += ["ai"]' \
		'PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]' \
		>> $(GAME_DIR)/server/conf/settings.py
	touch $@

demo: $(GAME_CONFIGURED)
	$(BIN)/python demo/play.py $(GAME_DIR)

evennia-test: $(GAME_CONFIGURED)
	cd $(GAME_DIR) && $(EVENNIA) test --settings settings.py ai

bench: $(STAMP)
	$(BIN)/python bench/tick_overhead.py
	$(BIN)/python bench/compaction.py

format: $(STAMP)
	$(BIN)/black --line-length 100 ai bench demo
	$(BIN)/isort --profile black --line-length 100 ai bench demo

clean:
	rm -rf build .pytest_cache
