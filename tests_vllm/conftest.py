"""vLLM for real, on CPU (``make test-vllm``: .venv-vllm's python, see the Makefile).

These tests are not collected by ``make test`` (``testpaths = tests``); here vLLM must be
installed, so a missing vLLM fails the session instead of skipping anything.

Engine settings for a small shared CPU, set before vLLM or torch is imported (a test that
needs another value passes its own environment to its child process):

- ``VLLM_CPU_KVCACHE_SPACE=1``: a 1 GiB KV cache per engine; without it vLLM reserves 92 %
  of the RAM and refuses to start when other processes hold some.
- ``OMP_NUM_THREADS=1`` and ``VLLM_CPU_OMP_THREADS_BIND=nobind``: on two cores shared with
  other processes, threads of a 135M model spin against each other and a thread pinned to a
  busy core waits; one unpinned thread decodes several times faster here.
- ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in the calling process, so an
  engine starts in ~10-20 s instead of ~40-100 s (two fewer processes importing torch and
  vLLM). The in-harness judge test runs with vLLM's default (engine processes) instead, since
  what it checks (one engine at a time) is about those processes.
"""

import importlib.util
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.pop("LM_EVAL_FIN_JUDGE", None)
os.environ.pop("LM_EVAL_FIN_JUDGE_OPTIONS", None)

import pytest  # noqa: E402

from lm_eval_fin import paths  # noqa: E402
from tests_vllm import figures  # noqa: E402


def pytest_configure(config):
    if importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError("tests_vllm need vLLM: run them with `make test-vllm` (it installs .venv-vllm)")


def pytest_terminal_summary(terminalreporter):
    lines = figures.report()
    if lines:
        terminalreporter.section("vLLM figures (this run)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def model_dir():
    """The embedded SmolLM2-135M-Instruct as a transformers folder."""
    return str(paths.embedded_model())


@pytest.fixture(scope="session")
def judge_spec(model_dir):
    return f"vllm:{model_dir}"
