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
module, one or two per child. Two ``vllm serve`` processes (tests_vllm/served.py) start with
the session too: the first serves the served runs (two at a time, once it answers) and the
served tests, the second joins it for the scale-out tests and is the one killed and restarted.
Their logs are kept under the session's temporary folder; the terminal summary names them when
a test failed.
"""

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

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

from lm_eval_fin.plumbing import paths  # noqa: E402
from tests_vllm import figures  # noqa: E402
from tests_vllm.runs import RunPool, run_arguments, served_run_arguments  # noqa: E402
from tests_vllm.served import VLLMServer  # noqa: E402

_server_logs: list = []


def pytest_configure(config):
    if importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError("tests_vllm need vLLM: run them with `make test-vllm` (it installs .venv-vllm)")


def pytest_terminal_summary(terminalreporter):
    skipped = len(terminalreporter.stats.get("skipped", ()))
    if skipped:
        terminalreporter.write_line(f"{skipped} vLLM tests skipped: here every one must run", red=True)
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        for log in _server_logs:
            terminalreporter.write_line(f"vllm serve log kept: {log}", yellow=True)
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
    workdir = tmp_path_factory.mktemp("runs")
    pool = RunPool(workdir, run_arguments(workdir, model_dir, judge_spec))
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def servers(request, model_dir):
    """Two ``vllm serve`` of the embedded model, started now and waited for by their users.
    Their logs go to a folder of their own (pytest's temporary folders are pruned by later
    sessions), removed after a session without failures and kept, and named, otherwise."""
    logs = Path(tempfile.mkdtemp(prefix="lm-eval-fin-vllm-serve-"))
    started = [VLLMServer(model_dir, logs / f"vllm-serve-{n}.log").start() for n in (1, 2)]
    _server_logs.extend(server.log for server in started)
    yield started
    for server in started:
        server.stop()
    if not request.session.testsfailed:
        shutil.rmtree(logs, ignore_errors=True)
        _server_logs.clear()
    for n, server in enumerate(started, 1):
        figures.record(f"vllm serve {n}: start to answering (s)", ", ".join(f"{s:.0f}" for s in server.starts))


@pytest.fixture(scope="session")
def served_runs(tmp_path_factory, servers):
    """The served ``lm-eval-fin run`` children (runs.py), two at a time, once the server answers."""
    workdir = tmp_path_factory.mktemp("served_runs")
    pool = RunPool(workdir, served_run_arguments(workdir, servers[0]), workers=2, before=servers[0].wait)
    yield pool
    pool.close()


@pytest.fixture
def server_back(servers):
    """The second server answering again (after a test killed and restarted it)."""
    if servers[1].process.poll() is not None:  # killed by a test that failed before restarting it
        servers[1].start()
    return servers[1].wait()


def _needs(item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


@pytest.fixture(scope="session", autouse=True)
def start_runs_with_the_session(request):
    """Start the servers and the runs before the first test when any collected test needs
    them, so that they overlap with the tests that work in this process."""
    for fixture in ("servers", "served_runs", "runs"):
        if any(_needs(item, fixture) for item in request.session.items):
            request.getfixturevalue(fixture)


def pytest_collection_modifyitems(items):
    """The tests that need no run first (stable: each module keeps its order), so that they
    work while the runs go on; then those of the served runs (which finish first), then those
    that need the second server back from its restart (it loads meanwhile), then those that
    wait for the in-process runs."""
    order = ("served_runs", "server_back", "runs")
    items.sort(key=lambda item: max((rank for rank, name in enumerate(order, 1) if _needs(item, name)), default=0))


def pytest_sessionfinish(session, exitstatus):
    """A skipped test fails the session: `make test-vllm` runs every vLLM test for real."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
