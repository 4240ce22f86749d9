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
  vLLM). The fin_lfqa run with an in-harness judge uses vLLM's default (engine processes)
  instead, so that one engine at a time is also checked on those processes.

The ``lm-eval-fin run`` children start with the session, two at a time, while the tests in
this process use their own engine (tests_vllm/runs.py): one engine in this process per test
module, one or two per child.
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
from tests_vllm.runs import RunPool  # noqa: E402


def pytest_configure(config):
    if importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError("tests_vllm need vLLM: run them with `make test-vllm` (it installs .venv-vllm)")


def pytest_terminal_summary(terminalreporter):
    skipped = len(terminalreporter.stats.get("skipped", ()))
    if skipped:
        terminalreporter.write_line(f"{skipped} vLLM tests skipped: here every one must run", red=True)
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


@pytest.fixture(scope="session")
def runs(tmp_path_factory, model_dir, judge_spec):
    """The ``lm-eval-fin run`` child processes (tests_vllm/runs.py)."""
    pool = RunPool(tmp_path_factory.mktemp("runs"), model_dir, judge_spec)
    yield pool
    pool.close()


@pytest.fixture(scope="session", autouse=True)
def start_runs_with_the_session(request):
    """Start the runs before the first test when any collected test needs them, so that they
    overlap with the tests that work in this process."""
    if any("runs" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("runs")


def pytest_collection_modifyitems(items):
    """The tests that need no run first (stable: each module keeps its order), so that they
    work while the runs go on; those that wait for a run come after."""
    items.sort(key=lambda item: "runs" in getattr(item, "fixturenames", ()))


def pytest_sessionfinish(session, exitstatus):
    """A skipped test fails the session: `make test-vllm` runs every vLLM test for real."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
