"""lm_eval_fin.sandbox: FinLFQA's code-execution rules, and containment of hostile snippets.

Every snippet runs in a real child process. The hostile suite runs once per module (in
parallel, through run_codes) and each test then checks one attack: contained, scored as a
failure, and failed for the reason the layer in charge gives, so that a snippet failing by
accident (a typo in the attack) cannot pass for containment.
"""

import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_fin import sandbox
from lm_eval_fin.sandbox import (
    FAILURE_CATEGORIES,
    ExecResult,
    Limits,
    SandboxError,
    code_exec_rate,
    failure_categories,
    probe,
    run_code,
    run_codes,
    runner,
)
from lm_eval_fin.sandbox.child import seccomp

SECRET_NAME = "LM_EVAL_FIN_TEST_SECRET"
SECRET_VALUE = "s3cr3t-token-4242"
RUNNING_AS_ROOT = os.geteuid() == 0
REPOSITORY = Path(__file__).resolve().parents[1]


def snippet(source: str) -> str:
    return textwrap.dedent(source).strip() + "\n"


# --- the FinLFQA rules: hand cases -------------------------------------------------------


def test_function_returning_a_number_passes():
    code = "def revenue_growth():\n    return (150 - 120) / 120\n"
    result = run_code(code)
    assert (result.ok, result.value, result.error, result.output) == (True, "0.25", None, "")
    assert result.category is None
    assert result.duration_s > 0


def test_function_with_parameters_called_without_arguments_fails():
    result = run_code("def growth(current, previous):\n    return current / previous - 1\n")
    assert not result.ok and result.value is None
    assert "missing 2 required positional arguments" in result.error
    assert result.category == "missing_arguments"


def test_required_keyword_arguments_are_missing_arguments_too():
    result = run_code("def growth(*, current):\n    return current\n")
    assert result.category == "missing_arguments"
    assert "missing 1 required keyword-only argument" in result.error


def test_a_type_error_inside_a_callable_function_is_an_exception():
    result = run_code("def f(x=None):\n    return len(x)\n")
    assert result.category == "exception"
    assert result.error.startswith("TypeError: object of type 'NoneType' has no len()")


def test_function_without_return_fails():
    result = run_code("def margin():\n    value = 3 / 4\n")
    assert not result.ok
    assert result.error == "margin() returned None"
    assert result.category == "none_result"


def test_indentation_error_fails():
    result = run_code("def f():\n    x = 1\n      return x\n")
    assert not result.ok
    assert result.error.startswith("IndentationError: unexpected indent")
    assert "line 3" in result.error
    assert result.category == "syntax"


def test_syntax_error_fails():
    result = run_code("def f(:\n    return 1\n")
    assert not result.ok and result.error.startswith("SyntaxError")
    assert result.category == "syntax"


def test_code_without_function_fails_even_if_it_computes():
    result = run_code("total = 1 + 2\nprint(total)\n")
    assert not result.ok
    assert result.error.startswith("no function defined")
    assert result.output == "3\n"
    assert result.category == "no_function"


def test_exception_names_type_message_and_line():
    result = run_code("def ratio():\n    debt = 10\n    return debt / 0\n")
    assert result.error == "ZeroDivisionError: division by zero (line 3)"
    assert result.category == "exception"


def test_an_exception_at_the_top_level_is_an_exception():
    result = run_code("rate = 1 / 0\ndef f():\n    return rate\n")
    assert (result.error, result.category) == ("ZeroDivisionError: division by zero (line 1)", "exception")


def test_last_defined_function_is_called():
    code = snippet("""
        def helper(x):
            return 2 * x

        def answer():
            return helper(21)
    """)
    assert run_code(code).value == "42"


def test_helpers_defined_after_the_entry_point_are_not_called():
    code = snippet("""
        def main():
            return g(1, 2)

        def g(a, b):
            return a + b
    """)
    assert run_code(code).value == "3"


def test_last_function_callable_without_arguments_is_called():
    code = snippet("""
        def first():
            return "first"

        def with_defaults(x=5, *rest, scale=2, **options):
            return x * scale

        def needs_keyword(*, rate):
            return rate

        needs_positional = lambda value: value
    """)
    assert run_code(code).value == "10"


def test_when_every_function_needs_arguments_the_last_one_fails():
    code = "def a(x):\n    return x\n\ndef b(x, y):\n    return x + y\n"
    result = run_code(code)
    assert not result.ok
    assert result.error.startswith("TypeError: b() missing 2 required positional arguments")
    assert result.category == "missing_arguments"


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("def f():\n    raise ValueError('never runs')\n    yield 1\n", "generator"),
        ("def f():\n    return (x for x in range(3))\n", "generator"),
        ("async def f():\n    raise ValueError('never runs')\n", "coroutine"),
        ("async def f():\n    yield 1\n", "asynchronous generator"),
    ],
)
def test_generator_and_coroutine_values_are_failures(source, kind):
    result = run_code(source)
    assert not result.ok and result.value is None
    assert result.error == (
        f"f() returned a {kind}, not a value: its body does not run until it is iterated or "
        "awaited"
    )
    assert result.category == "generator"
    assert result.output == ""  # no "never awaited" warning either


def test_lambda_bound_to_a_name_counts_as_a_function():
    assert run_code("answer = lambda: 7\n").value == "7"


def test_value_is_the_repr_of_the_return_value():
    assert run_code("def f():\n    return 'abc'\n").value == "'abc'"
    assert run_code("def f():\n    return {'CWT': 1.5}\n").value == "{'CWT': 1.5}"
    assert run_code("def f():\n    return 0\n").ok  # falsy but not None


def test_standard_library_imports_work():
    code = snippet("""
        import math, statistics, datetime, json, re
        from decimal import Decimal, ROUND_HALF_UP
        from collections import namedtuple

        Row = namedtuple("Row", "ticker value")

        def f():
            rounded = Decimal("3.965").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            return str(rounded), statistics.mean([1, 2, 3]), math.isclose(0.1 + 0.2, 0.3)
    """)
    assert run_code(code).value == "('3.97', 2, True)"


# --- numpy and pandas, and nothing else from site-packages ---------------------------------

# What the tests below rely on is what `make install` installs: the package with its declared
# requirements (numpy and pandas among them), nothing else that happens to be on the machine.
OFFERED = {name for name, _path in sandbox.offered_packages() if name}


def _normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _required_but_not_offered() -> list[str]:
    """Import names of the package's own declared requirements (extras left out) and of the
    package itself: installed wherever the package is, none of them offered to snippets."""
    required = {_normalised("lm-eval-fin")}
    for requirement in importlib.metadata.requires("lm-eval-fin") or ():
        if "extra ==" not in requirement:
            required.add(_normalised(re.match(r"[A-Za-z0-9._-]+", requirement).group()))
    names = {
        name
        for name, distributions in importlib.metadata.packages_distributions().items()
        if name.isidentifier() and required & {_normalised(d) for d in distributions}
    }
    return sorted(names - OFFERED - set(sys.stdlib_module_names))


REQUIRED_NOT_OFFERED = _required_but_not_offered()


def test_numpy_and_pandas_are_offered_as_the_package_requires_them():
    assert {"numpy", "pandas"} <= OFFERED, sandbox.offered_packages()


def test_numpy_snippet_runs_with_the_values_it_computes():
    code = snippet("""
        import numpy as np

        def cagr():
            revenue = np.array([1432.1, 1610.4, 1820.0])
            growth = (revenue[-1] / revenue[0]) ** (1 / (len(revenue) - 1)) - 1
            determinant = np.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))
            return round(float(growth) * 100, 4), round(float(determinant), 9)
    """)
    result = run_code(code, timeout=30)
    assert result.ok, result.error
    # (1820.0 / 1432.1) ** 0.5 - 1 = 1.270861 ** 0.5 - 1 = 0.127325; det [[2, 1], [1, 3]] = 6 - 1 = 5
    assert eval(result.value) == (12.7325, 5.0)


def test_pandas_snippet_runs_with_the_values_it_computes():
    code = snippet("""
        import pandas as pd

        def margin_by_segment():
            frame = pd.DataFrame(
                {"segment": ["water", "gas", "water"], "revenue": [100.0, 50.0, 300.0], "income": [10.0, 5.0, 50.0]}
            )
            totals = frame.groupby("segment")[["revenue", "income"]].sum()
            margins = (totals["income"] / totals["revenue"]).round(4)
            quarter_end = pd.Timestamp("2024-03-31", tz="America/New_York").isoformat()
            return margins.to_dict(), quarter_end
    """)
    result = run_code(code, timeout=30)
    assert result.ok, result.error
    # gas 5 / 50 = 0.1; water (10 + 50) / (100 + 300) = 0.15; New York is UTC-4 on 31 March
    assert eval(result.value) == ({"gas": 0.1, "water": 0.15}, "2024-03-31T00:00:00-04:00")


def test_pandas_may_write_and_read_csv_in_the_working_directory():
    code = snippet("""
        import pandas as pd

        def f():
            pd.DataFrame({"eps": [1.21, 1.35]}).to_csv("eps.csv", index=False)
            return float(pd.read_csv("eps.csv")["eps"].sum())
    """)
    assert run_code(code, timeout=30).value == "2.56"


def test_numerical_libraries_run_single_threaded():
    code = snippet("""
        import os, threading
        import numpy as np

        def f():
            product = np.ones((300, 300)) @ np.ones((300, 300))  # a BLAS call
            return threading.active_count(), float(product[0, 0]), os.environ["OPENBLAS_NUM_THREADS"]
    """)
    assert eval(run_code(code, timeout=30).value) == (1, 300.0, "1")


def _extension_module() -> tuple[str, str]:
    """(name, file) of an extension module of the standard library, one this interpreter
    loads from a file rather than having it compiled in."""
    for name in ("_decimal", "_json", "_bisect", "_struct", "_csv", "_random", "_datetime", "math"):
        spec = importlib.util.find_spec(name)
        if spec and spec.origin and spec.origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return name, spec.origin
    raise AssertionError("no extension module of the standard library is a file here")


def test_the_package_s_requirements_are_found_for_the_next_test():
    # the requirements of a `make install` that snippets must not import (lm_eval, evaluate, ...)
    assert {"lm_eval_fin", "lm_eval", "evaluate", "datasets", "transformers"} <= set(REQUIRED_NOT_OFFERED)


@pytest.mark.parametrize("name", REQUIRED_NOT_OFFERED)
def test_other_installed_packages_are_not_importable(name):
    assert importlib.util.find_spec(name) is not None  # installed for the parent
    result = run_code(f"import {name}\ndef f():\n    return 1\n")
    assert (result.ok, result.category) == (False, "exception")
    assert result.error == f"ModuleNotFoundError: No module named '{name}' (line 1)"


def test_other_installed_packages_cannot_be_read_or_loaded_by_path(tmp_path):
    source = importlib.util.find_spec("lm_eval_fin.sandbox").origin  # installed for the parent
    read = run_code(f"def f():\n    return open({source!r}).read()\n")
    assert read.category == "refused" and f"reading {source!r} is not allowed" in read.error
    # A working extension module in a folder of its own, as another package's would be (the
    # standard library's, copied): only the guard's refusal, not a broken file, passes.
    name, original = _extension_module()
    foreign = tmp_path / "foreign_package" / os.path.basename(original)
    foreign.parent.mkdir()
    shutil.copy(original, foreign)
    code = snippet(f"""
        import _imp, importlib.machinery

        def f():
            return _imp.create_dynamic(importlib.machinery.ModuleSpec({name!r}, None, origin={str(foreign)!r}))
    """)
    loaded = run_code(code)
    assert loaded.category == "refused", loaded
    assert f"loading {name} from {str(foreign)!r} is not allowed" in loaded.error


def test_print_output_is_captured():
    result = run_code("def f():\n    print('checking')\n    return 1\n")
    assert result.ok and result.output == "checking\n"


def test_bytes_code_runs_and_non_code_is_a_failure_not_a_crash():
    class Text(str):  # e.g. numpy.str_ from a dataset column
        def __str__(self):
            return "broken"

    assert run_code(b"def f():\n    return 5\n").value == "5"
    assert run_code(Text("def f():\n    return 6\n")).value == "6"
    for junk in (None, 5, ["def f(): return 1"]):
        result = run_code(junk)
        assert not result.ok and result.error.startswith("not code")
        assert result.category == "syntax"


def test_exit_calls_are_failures():
    result = run_code("import sys\ndef f():\n    sys.exit(0)\n")
    assert (result.error, result.category) == ("SystemExit: 0 (line 3)", "exception")
    result = run_code("import os\ndef f():\n    os._exit(0)\n")
    assert result.error == "the child exited with status 0 without a result"
    assert result.category == "exception"


def test_a_crash_of_the_interpreter_is_an_exception_and_ignoring_sigxcpu_a_resource_kill():
    crash = run_code("import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    assert crash.category == "refused"  # os.kill is refused even towards itself
    abort = run_code("import os\ndef f():\n    os.abort()\n")
    assert (abort.error, abort.category) == ("the child was killed by SIGABRT", "exception")
    stubborn = snippet("""
        import signal
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        def f():
            while True:
                pass
    """)
    killed = run_code(stubborn, timeout=30, cpu_seconds=1)
    assert killed.category == "resource"
    assert killed.error == "the child was killed by SIGKILL (CPU time hard limit, or out of memory)"


def test_snippet_may_use_files_in_its_working_directory_which_is_removed_afterwards():
    code = snippet("""
        import os, tempfile

        def f():
            with open("notes.txt", "w") as handle:
                handle.write("42")
            with tempfile.NamedTemporaryFile() as scratch:
                scratch.write(b"x")
            with open("notes.txt") as handle:
                return os.getcwd(), handle.read()
    """)
    result = run_code(code)
    assert result.ok, result.error
    workdir, content = eval(result.value)
    assert content == "42"
    assert Path(workdir).name.startswith("lm-eval-fin-sandbox-")
    assert not Path(workdir).exists()


def test_child_runs_with_its_own_environment_and_unprivileged_when_root():
    code = "import os\ndef f():\n    return os.getuid(), os.getgid(), dict(os.environ)\n"
    uid, gid, environment = eval(run_code(code).value)
    if RUNNING_AS_ROOT:
        assert (uid, gid) == (65534, 65534)
    else:
        assert uid == os.getuid()
    environment.pop("LC_CTYPE", None)  # Python's own C-locale coercion
    assert environment == sandbox.CHILD_ENVIRONMENT  # nothing inherited
    assert environment["OPENBLAS_NUM_THREADS"] == environment["OMP_NUM_THREADS"] == "1"


def test_limits_are_set_in_the_child():
    code = snippet("""
        import resource

        def f():
            return [resource.getrlimit(which) for which in (
                resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE,
                resource.RLIMIT_NPROC, resource.RLIMIT_CORE, resource.RLIMIT_NOFILE)]
    """)
    limits = eval(run_code(code, timeout=2, memory_mb=300, file_size_mb=1).value)
    assert limits == [(300 << 20,) * 2, (2, 3), (1 << 20,) * 2, (0, 0), (0, 0), (64, 64)]


def test_wall_clock_limit_stops_a_sleeping_snippet():
    result = run_code("import time\ndef f():\n    time.sleep(3600)\n    return 1\n", timeout=1)
    assert result.error == "timed out after 1 s (wall clock)"
    assert result.category == "timeout"


def test_cpu_limit_stops_a_busy_loop_before_the_wall_clock_does():
    result = run_code("def f():\n    while True:\n        pass\n", timeout=60, cpu_seconds=1)
    assert result.error == "CPU time limit (1 s) exceeded"
    assert result.category == "timeout"


def test_file_size_limit_stops_big_writes():
    code = (
        "def f():\n    with open('big', 'wb') as out:\n        return out.write(b'x' * (2 << 20))\n"
    )
    result = run_code(code, file_size_mb=1)
    assert not result.ok and "File too large" in result.error
    assert result.category == "resource"


def test_memory_limit_is_a_resource_failure():
    result = run_code("def f():\n    return len(bytearray(400 << 20))\n", memory_mb=200)
    assert (result.error, result.category) == ("MemoryError (line 2)", "resource")


def test_each_snippet_gets_a_fresh_process():
    polluter = (
        "import builtins, os\ndef f():\n    builtins.POLLUTED = True\n    return os.getpid()\n"
    )
    checker = (
        "import builtins, os\ndef f():\n    return os.getpid(), hasattr(builtins, 'POLLUTED')\n"
    )
    results = run_codes([polluter, checker, polluter, checker], workers=2)
    pids = [
        int(results[0].value),
        eval(results[1].value)[0],
        int(results[2].value),
        eval(results[3].value)[0],
    ]
    assert len(set(pids)) == 4
    assert eval(results[1].value)[1] is False and eval(results[3].value)[1] is False


def test_run_codes_keeps_order_and_handles_mixed_input():
    codes = [f"def f():\n    return {i}\n" for i in range(6)] + ["x = 1\n", None]
    results = run_codes(codes, workers=3)
    assert [r.value for r in results[:6]] == [str(i) for i in range(6)]
    assert [r.ok for r in results[6:]] == [False, False]
    assert run_codes([]) == []


def test_invalid_limits_raise():
    with pytest.raises(ValueError, match="timeout"):
        run_code("def f():\n    return 1\n", timeout=0)
    with pytest.raises(ValueError, match="disk_mb"):
        run_code("def f():\n    return 1\n", disk_mb=0)
    with pytest.raises(TypeError):
        run_codes(["def f():\n    return 1\n"], memory=5)
    assert Limits(timeout=2.5).cpu_limit == 3


def test_a_sandbox_that_cannot_start_raises_instead_of_scoring_zero(tmp_path, monkeypatch):
    broken_child = tmp_path / "broken_child.py"
    broken_child.write_text("import sys\nsys.exit('cannot set up: no /proc here')\n")
    monkeypatch.setattr(runner, "CHILD_MODULES", (("snippet", broken_child),))
    with pytest.raises(SandboxError, match="cannot set up: no /proc here"):
        run_code("def f():\n    return 1\n")


# --- kernel isolation and its fallback ---------------------------------------------------

NAMESPACES = sandbox.isolation().namespaces


def test_isolation_is_either_namespaces_or_a_reason():
    found = sandbox.isolation()
    assert bool(found.namespaces) != bool(found.reason)
    if found.namespaces:
        assert found.namespaces[0] == "mount"


@pytest.mark.skipif(not NAMESPACES, reason="no kernel namespaces here")
def test_with_namespaces_everything_but_a_bounded_tmpfs_is_read_only():
    code = snippet("""
        import os

        def f():
            read_only = lambda path: bool(os.statvfs(path).f_flag & os.ST_RDONLY)
            here = os.statvfs(".")
            flags = [read_only(p) for p in ("/", "..", "/tmp", "/dev/shm", "/proc", ".")]
            return flags, here.f_blocks * here.f_frsize, here.f_files
    """)
    flags, size, inodes = eval(run_code(code, disk_mb=3).value)
    assert flags == [True] * 5 + [False]
    assert size == 3 << 20
    assert inodes == sandbox.MAX_WORKDIR_ENTRIES


def test_probe_failure_is_a_reason_and_logged_once(monkeypatch, caplog):
    monkeypatch.setattr(probe, "_isolation", None)
    monkeypatch.delenv(sandbox.NO_NAMESPACES_VARIABLE, raising=False)
    # CSIGNAL bits are not unshare(2) flags: EINVAL, as any refusal would be
    monkeypatch.setattr(probe, "NAMESPACE_CHOICES", ((("mount",), sandbox.CLONE_NEWNS | 1),))
    with caplog.at_level("WARNING", logger="lm_eval_fin.sandbox"):
        first, second = sandbox.isolation(), sandbox.isolation()
    assert first is second and first.namespaces == () and first.flags == 0
    if RUNNING_AS_ROOT:
        assert "could not set up the namespaces: Invalid argument (unshare)" in first.reason
    else:
        assert "not running as root" in first.reason
    warnings = [r for r in caplog.records if r.name == "lm_eval_fin.sandbox"]
    assert len(warnings) == 1 and first.reason in warnings[0].getMessage()
    assert run_code("def f():\n    return 1\n").ok  # the fallback runs snippets


def test_namespaces_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(probe, "_isolation", None)
    monkeypatch.setenv(sandbox.NO_NAMESPACES_VARIABLE, "1")
    assert sandbox.isolation().reason == f"turned off by {sandbox.NO_NAMESPACES_VARIABLE}"


def test_code_exec_rate_is_micro_and_zero_without_snippets():
    ok, failed = ExecResult(ok=True, value="1"), ExecResult(ok=False, error="x")
    assert code_exec_rate([ok, failed, failed, ok]) == 0.5
    assert code_exec_rate([ok]) == 1.0
    assert code_exec_rate([]) == 0.0
    assert code_exec_rate(iter([failed])) == 0.0


def failed(category):
    return ExecResult(ok=False, error="e", category=category)


def test_failure_categories_are_shares_of_all_snippets_by_hand():
    ok = ExecResult(ok=True, value="1")
    results = [ok, ok, failed("missing_arguments"), failed("missing_arguments"), failed("missing_arguments"),
               failed("none_result"), failed("syntax"), failed("timeout")]  # fmt: skip
    shares = failure_categories(iter(results))
    assert list(shares) == [f"code_{name}" for name in FAILURE_CATEGORIES]
    # 8 snippets: 3 missing arguments, 1 each of none, syntax and timeout, 2 ran
    assert shares["code_missing_arguments"] == 3 / 8
    assert shares["code_none_result"] == shares["code_syntax"] == shares["code_timeout"] == 1 / 8
    assert shares["code_exception"] == shares["code_refused"] == shares["code_no_function"] == 0.0
    assert sum(shares.values()) + code_exec_rate(results) == 1.0


def test_failure_categories_without_snippets_and_for_uncategorised_failures():
    assert set(failure_categories([]).values()) == {0.0}
    shares = failure_categories([ExecResult(ok=False, error="made by hand"), failed("not a category")])
    assert shares["code_exception"] == 1.0


def test_failure_categories_of_real_runs_match_the_paper_s_kinds():
    codes = [
        "def growth():\n    return (150 - 120) / 120\n",  # runs
        "def growth(current, previous):\n    return current / previous - 1\n",  # missing arguments
        "def growth():\n    value = 0.25\n",  # returns None
        "def growth():\n    a = 1\n      return a\n",  # indentation error
        "growth = 0.25\n",  # no function
        "def growth():\n    return 1 / 0\n",  # exception
    ]
    shares = failure_categories(run_codes(codes, workers=2))
    sixth = 1 / 6
    assert {name: share for name, share in shares.items() if share} == {
        "code_missing_arguments": sixth, "code_none_result": sixth, "code_syntax": sixth,
        "code_no_function": sixth, "code_exception": sixth,
    }  # fmt: skip


# --- hostile snippets --------------------------------------------------------------------

HOSTILE = {
    "fork_bomb": """
        import os
        def f():
            while True:
                os.fork()
    """,
    "thread_bomb": """
        import _thread
        def f():
            for _ in range(1000):
                _thread.start_new_thread(lambda: None, ())
            return "spawned"
    """,
    "subprocess": """
        import subprocess
        def f():
            return subprocess.run(["true"])
    """,
    # the standard library's subprocess, run on a _posixsubprocess had past the import guard,
    # with its sys.audit call silenced
    "fork_exec_via_imp": """
        import importlib.machinery, importlib.util, sys
        def f():
            sys.modules["_posixsubprocess"] = load_bypassing_import("_posixsubprocess")
            spec = importlib.machinery.PathFinder.find_spec("subprocess")
            real = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(real)
            class QuietSys:
                audit = staticmethod(lambda *args: None)
                def __getattr__(self, name):
                    return getattr(sys, name)
            real.sys = QuietSys()
            return real.Popen(["/bin/sh", "-c", "touch /tmp/lm-eval-fin-pwned"]).wait()
    """,
    "os_system": """
        import os
        def f():
            return os.system("touch /tmp/lm-eval-fin-pwned")
    """,
    "memory_bomb": """
        def f():
            data = "x" * 2**20
            while True:
                data = data + data
    """,
    "memory_bomb_single": """
        def f():
            return len(b"x" * 2**40)
    """,
    "busy_loop": """
        def f():
            while True:
                pass
    """,
    "write_outside": """
        def f():
            with open(VICTIM, "w") as handle:
                handle.write("pwned")
            return "written"
    """,
    "append_outside_os_open": """
        import os
        def f():
            fd = os.open(VICTIM, os.O_WRONLY | os.O_APPEND)
            return os.write(fd, b"pwned")
    """,
    "write_outside_pathlib": """
        import pathlib
        def f():
            return pathlib.Path(OUTSIDE_DIR, "new.txt").write_text("pwned")
    """,
    "write_relative_to_another_folder": """
        import json, os
        def f():
            library = os.open(os.path.dirname(json.__file__), os.O_RDONLY)  # may be read
            # "new.txt" looks like the working directory's; dir_fd makes it the library's
            return os.open("new.txt", os.O_WRONLY | os.O_CREAT, dir_fd=library)
    """,
    "write_after_patching_builtins_and_os_path": """
        import builtins, os, posixpath
        def f():
            inside = lambda path, **kw: os.getcwd() + "/x"
            posixpath.normpath = posixpath.realpath = posixpath.abspath = inside
            builtins.len = lambda obj: 0
            builtins.PermissionError = KeyError
            with open(VICTIM, "w") as handle:
                handle.write("pwned")
            return "written"
    """,
    "rewrite_hook_defaults_from_traceback": """
        def f():
            try:
                open(VICTIM, "w")
            except PermissionError as error:
                tb = error.__traceback__
                while tb.tb_next:
                    tb = tb.tb_next
                normalise = tb.tb_frame.f_locals["_allowed"].__defaults__[0]
                normalise.__defaults__ = normalise.__defaults__[:-1] + ("/",)
            with open(VICTIM, "w") as handle:
                handle.write("pwned")
            return "written"
    """,
    "gc_walk": """
        import gc
        def f():
            return len(gc.get_objects())
    """,
    "proc_self_mem": """
        def f():
            with open("/proc/self/mem", "r+b") as memory:
                return memory.read(1)
    """,
    "delete_outside": """
        import os
        def f():
            os.remove(VICTIM)
            return "deleted"
    """,
    "rename_outside": """
        import os
        def f():
            os.rename(VICTIM, VICTIM + ".moved")
            return "moved"
    """,
    "rmtree_outside": """
        import shutil
        def f():
            shutil.rmtree(OUTSIDE_DIR)
            return "removed"
    """,
    "chdir_then_write": """
        import os
        def f():
            os.chdir(OUTSIDE_DIR)
            return open("new.txt", "w")
    """,
    "mkfifo_outside": """
        import os
        def f():
            os.mkfifo(OUTSIDE_DIR + "/fifo")
            return "made"
    """,
    "mknod_outside": """
        import os
        def f():
            os.mknod(OUTSIDE_DIR + "/node")
            return "made"
    """,
    "memfd": """
        import os
        def f():
            return os.memfd_create("hidden")
    """,
    "memfd_via_rebuilt_posix": """
        import _imp, importlib.machinery
        def f():
            posix = _imp.create_builtin(importlib.machinery.ModuleSpec("posix", None))
            return posix.memfd_create("hidden")
    """,
    "exec_via_rebuilt_posix": """
        import _imp, importlib.machinery
        def f():
            posix = _imp.create_builtin(importlib.machinery.ModuleSpec("posix", None))
            posix.execv("/bin/sh", ["sh", "-c", "touch /tmp/lm-eval-fin-pwned"])
    """,
    "write_dev_shm": """
        def f():
            with open("/dev/shm/lm-eval-fin-pwned", "wb") as handle:
                return handle.write(b"x" * (64 << 20))
    """,
    "native_code_from_workdir": """
        import _json
        def f():
            with open(_json.__file__, "rb") as library, open("copy.so", "wb") as copy:
                copy.write(library.read())
            import _imp, importlib.machinery, os
            spec = importlib.machinery.ModuleSpec("_json", None, origin=os.getcwd() + "/copy.so")
            return _imp.create_dynamic(spec)
    """,
    "disk_filler": """
        def f():
            for i in range(50):
                with open(f"big{i}", "wb") as handle:
                    handle.write(b"x" * (15 << 20))
            return "750 MB written"
    """,
    "many_files": """
        def f():
            for i in range(20000):
                open(f"f{i}", "w").close()
            return "20000 files"
    """,
    "symlink_out_of_workdir": """
        import os
        def f():
            os.symlink(OUTSIDE_DIR, "escape")
            return open("escape/new.txt", "w")
    """,
    "read_secret_env": """
        import os
        def f():
            return os.environ[SECRET_NAME]
    """,
    "read_parent_environ": """
        import os
        def f():
            with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
                return handle.read()
    """,
    "read_secret_file": """
        def f():
            with open(SECRET_FILE) as handle:
                return handle.read()
    """,
    "socket_connect": """
        import socket
        def f():
            return socket.create_connection(("127.0.0.1", PORT), timeout=1)
    """,
    "socket_via_imp": """
        def f():
            _socket = load_bypassing_import("_socket")
            connection = _socket.socket()
            connection.connect(("127.0.0.1", PORT))
            return connection
    """,
    "huge_output": """
        def f():
            while True:
                print("x" * 10000)
    """,
    "huge_stderr": """
        import sys
        def f():
            while True:
                sys.stderr.write("y" * 10000)
    """,
    "kill_parent": """
        import os, signal
        def f():
            os.kill(os.getppid(), signal.SIGKILL)
            return "killed"
    """,
    "killpg_parent": """
        import os, signal
        def f():
            os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
            return "killed"
    """,
    "pidfd_kill_parent": """
        import os, signal
        def f():
            signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)
            return "killed"
    """,
    "pidfd_kill_parent_via_rebuilt_modules": """
        import _imp, importlib.machinery, os
        def f():
            posix = _imp.create_builtin(importlib.machinery.ModuleSpec("posix", None))
            _signal = _imp.create_builtin(importlib.machinery.ModuleSpec("_signal", None))
            _signal.pidfd_send_signal(posix.pidfd_open(os.getppid()), 9)
            return "killed"
    """,
    "ctypes": """
        import ctypes
        def f():
            return ctypes.string_at(0, 8)
    """,
    "ctypes_via_imp": """
        def f():
            return load_bypassing_import("_ctypes").dlopen(None)
    """,
    "recursion": """
        def f():
            return f()
    """,
    "deep_recursion_without_limit": """
        import sys
        sys.setrecursionlimit(10**8)
        def g(n):
            return g(n + 1)
        def f():
            return g(0)
    """,
    "forge_result_record": """
        import os
        def f():
            for fd in range(3, 64):  # wherever the result pipe is
                try:
                    os.write(fd, b"ok\\n'forged'")
                except OSError:
                    pass
            os._exit(0)
    """,
    "raise_limits": """
        import resource
        def f():
            resource.setrlimit(resource.RLIMIT_AS, (-1, -1))
            return "unlimited"
    """,
    "become_root": """
        import os
        def f():
            os.setuid(0)
            return "root"
    """,
}

# Snippets that turn numpy and pandas against the sandbox (run when both are installed).
HOSTILE_NUMPY = {
    "numpy_ctypeslib": """
        import numpy as np
        def f():
            return np.ctypeslib.as_ctypes(np.zeros(3))
    """,
    "numpy_array_ctypes": """
        import numpy as np
        def f():
            return np.zeros(3).ctypes.data
    """,
    "numpy_save_outside": """
        import numpy as np
        def f():
            np.save(OUTSIDE_DIR + "/saved.npy", np.zeros(3))
            return "saved"
    """,
    "numpy_format_writes_outside": """
        import numpy.lib.format as npformat
        def f():
            array = npformat.open_memmap(OUTSIDE_DIR + "/mapped.npy", mode="w+", dtype="f8", shape=(3,))
            array[:] = 1
            return "mapped"
    """,
    "numpy_tofile_victim": """
        import numpy as np
        def f():
            np.frombuffer(b"pwned", dtype="u1").tofile(VICTIM)
            return "written"
    """,
    "numpy_memmap_victim": """
        import numpy as np
        def f():
            mapped = np.memmap(VICTIM, dtype="u1", mode="r+")
            mapped[:] = 0
            return "zeroed"
    """,
    "numpy_fromfile_secret": """
        import numpy as np
        def f():
            return np.fromfile(SECRET_FILE, dtype="u1").tobytes()
    """,
    "numpy_loadtxt_parent_environ": """
        import os
        import numpy as np
        def f():
            return np.loadtxt(f"/proc/{os.getppid()}/environ", dtype=str)
    """,
    "pandas_to_csv_outside": """
        import pandas as pd
        def f():
            pd.DataFrame({"a": [1]}).to_csv(OUTSIDE_DIR + "/out.csv")
            return "written"
    """,
    "pandas_to_pickle_victim": """
        import pandas as pd
        def f():
            pd.DataFrame({"a": [1]}).to_pickle(VICTIM)
            return "written"
    """,
    "pandas_read_csv_secret": """
        import pandas as pd
        def f():
            return pd.read_csv(SECRET_FILE, header=None).to_string()
    """,
    "pandas_read_csv_url": """
        import pandas as pd
        def f():
            return pd.read_csv(f"http://127.0.0.1:{PORT}/data.csv").to_string()
    """,
}

# The layer that must have stopped each attack, as it appears in the error (or one of these).
OUTSIDE_WORKDIR = "is not allowed (only inside the working directory)"
SECCOMP_REFUSAL = "[Errno 1] Operation not permitted"
READ_REFUSAL = "is not allowed (only the working directory, the standard library, numpy and pandas)"
EXPECTED_ERROR = {
    "fork_bomb": "os.fork is not allowed",
    "thread_bomb": "can't start new thread",
    "subprocess": "importing subprocess is not allowed, so subprocess.run is unavailable",
    "os_system": "os.system is not allowed",
    "memory_bomb": ("MemoryError", "timed out"),  # on a crowded machine the clock may win
    "memory_bomb_single": "MemoryError",
    "busy_loop": ("CPU time limit (1 s) exceeded", "timed out"),  # whichever comes first
    "write_outside": OUTSIDE_WORKDIR,
    "append_outside_os_open": OUTSIDE_WORKDIR,
    "write_outside_pathlib": OUTSIDE_WORKDIR,
    "write_relative_to_another_folder": "os.open needs an absolute path",
    "write_after_patching_builtins_and_os_path": OUTSIDE_WORKDIR,
    "rewrite_hook_defaults_from_traceback": "changing the sandbox's own functions is not allowed",
    "gc_walk": "gc.get_objects is not allowed",
    "proc_self_mem": "writing '/proc/self/mem' is not allowed",
    "delete_outside": "os.remove on",
    "rename_outside": "os.rename on",
    "rmtree_outside": "shutil.rmtree is not allowed",
    "chdir_then_write": "os.chdir is not allowed",
    # no audit event for these: the seccomp filter refuses them
    "mkfifo_outside": SECCOMP_REFUSAL,
    "mknod_outside": SECCOMP_REFUSAL,
    "memfd": SECCOMP_REFUSAL,
    "memfd_via_rebuilt_posix": SECCOMP_REFUSAL,
    "exec_via_rebuilt_posix": "os.exec is not allowed",  # the event comes from C
    "write_dev_shm": OUTSIDE_WORKDIR,
    "native_code_from_workdir": "(native code only from the standard library, numpy and pandas)",
    # the tmpfs is full (namespaces), or the parent's watchdog stopped it (fallback)
    "disk_filler": ("No space left on device", "wrote more than 64 MB"),
    # creating files is slow on some disks: the CPU limit may come first in the fallback
    "many_files": ("No space left on device", "4096 files and folders", "CPU time limit"),
    "symlink_out_of_workdir": "os.symlink is not allowed",
    "read_secret_env": f"KeyError: '{SECRET_NAME}'",
    "read_parent_environ": "/environ' is not allowed",
    "read_secret_file": READ_REFUSAL,
    "socket_connect": "importing socket is not allowed",
    "huge_output": "printed more than 65536 bytes",
    "huge_stderr": "printed more than 65536 bytes",
    "kill_parent": "os.kill is not allowed",
    "killpg_parent": "os.killpg is not allowed",
    "pidfd_kill_parent": SECCOMP_REFUSAL,
    "pidfd_kill_parent_via_rebuilt_modules": SECCOMP_REFUSAL,
    "ctypes": "importing ctypes is not allowed, so ctypes.string_at is unavailable",
    "recursion": "RecursionError",
    "deep_recursion_without_limit": "",  # CPU, memory or stack: whichever comes first
    "forge_result_record": "without a result",
    "raise_limits": "resource.setrlimit is not allowed",
    "become_root": "PermissionError",
    "numpy_ctypeslib": "importing ctypes is not allowed",
    "numpy_array_ctypes": "importing ctypes is not allowed",
    "numpy_save_outside": OUTSIDE_WORKDIR,
    "numpy_format_writes_outside": OUTSIDE_WORKDIR,
    "numpy_tofile_victim": OUTSIDE_WORKDIR,
    "numpy_memmap_victim": OUTSIDE_WORKDIR,
    "numpy_fromfile_secret": READ_REFUSAL,
    "numpy_loadtxt_parent_environ": READ_REFUSAL,
    "pandas_to_csv_outside": OUTSIDE_WORKDIR,
    "pandas_to_pickle_victim": OUTSIDE_WORKDIR,
    "pandas_read_csv_secret": READ_REFUSAL,
    "pandas_read_csv_url": "importing socket is not allowed",
}
# The failure category each attack must get: "refused" unless named here. The kernel's
# refusals (seccomp's EPERM) read like any other error, hence "exception".
EXPECTED_CATEGORY = {
    "memory_bomb": ("resource", "timeout"),
    "memory_bomb_single": "resource",
    "busy_loop": "timeout",
    "mkfifo_outside": "exception",
    "mknod_outside": "exception",
    "memfd": "exception",
    "memfd_via_rebuilt_posix": "exception",
    "pidfd_kill_parent": "exception",
    "pidfd_kill_parent_via_rebuilt_modules": "exception",
    "disk_filler": "resource",
    "many_files": ("resource", "timeout"),
    "read_secret_env": "exception",
    "huge_output": "resource",
    "huge_stderr": "resource",
    "recursion": "exception",
    "deep_recursion_without_limit": ("exception", "resource", "timeout"),
    "forge_result_record": "exception",
    "become_root": "exception",
}


# Modules the *_via_imp attacks load past the import statement, as an attacker would: with
# _imp.create_dynamic and the extension's file, whose path comes from this (unsandboxed)
# process (inside the sandbox, sys.path holds /proc/self/fd/N entries on which a path finder
# may find nothing, and the attack must reach the import guard itself); or, where this
# interpreter has the module compiled in (Debian's _socket and _posixsubprocess), with
# _imp.create_builtin, which raises no audit event: then what the module does must be
# refused instead.
IMP_ATTACK_MODULES = ("_posixsubprocess", "_socket", "_ctypes")
BUILT_IN = sorted(set(IMP_ATTACK_MODULES) & set(sys.builtin_module_names))
LOAD_BYPASSING_IMPORT = """
def load_bypassing_import(name):
    import _imp, importlib.machinery
    if name in BUILT_IN:
        return _imp.create_builtin(importlib.machinery.ModuleSpec(name, None))
    return _imp.create_dynamic(importlib.machinery.ModuleSpec(name, None, origin=EXTENSIONS[name]))
"""


def extension_paths(names):
    paths = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin and os.path.isfile(spec.origin), f"no extension file for {name}"
        paths[name] = spec.origin
    return paths


def _guarded(name, past_the_guard):
    """What stops an attack that loads ``name`` past the import statement."""
    return past_the_guard if name in BUILT_IN else f"importing {name} is not allowed"


EXPECTED_ERROR.update(
    fork_exec_via_imp=_guarded("_posixsubprocess", (SECCOMP_REFUSAL, "os.posix_spawn is not allowed")),
    socket_via_imp=_guarded("_socket", "socket.__new__ is not allowed"),
    ctypes_via_imp=_guarded("_ctypes", "ctypes.dlopen is not allowed"),
)
if "_posixsubprocess" in BUILT_IN:  # the kernel's EPERM, or the hook's refusal of posix_spawn
    EXPECTED_CATEGORY["fork_exec_via_imp"] = ("exception", "refused")


@pytest.fixture(scope="module")
def attack():
    """Run the whole hostile suite once, against a world-writable folder outside the
    sandbox (so that only the sandbox, not file permissions, protects it), a listening
    socket and a secret in the environment; yield the results and what to check after."""
    outside = Path(tempfile.mkdtemp(prefix="lm-eval-fin-victim-"))
    outside.chmod(0o777)
    victim = outside / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    secret_file = outside / "secret.env"
    secret_file.write_text(SECRET_VALUE)
    secret_file.chmod(0o644)
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    prelude = (
        f"VICTIM = {str(victim)!r}\nOUTSIDE_DIR = {str(outside)!r}\n"
        f"SECRET_FILE = {str(secret_file)!r}\nSECRET_NAME = {SECRET_NAME!r}\n"
        f"PORT = {server.getsockname()[1]}\n"
        f"EXTENSIONS = {extension_paths(set(IMP_ATTACK_MODULES) - set(BUILT_IN))!r}\n"
        f"BUILT_IN = {BUILT_IN!r}\n" + LOAD_BYPASSING_IMPORT
    )
    attacks = {**HOSTILE, **HOSTILE_NUMPY}
    names = list(attacks)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(SECRET_NAME, SECRET_VALUE)
            results = run_codes(
                [prelude + snippet(attacks[name]) for name in names],
                timeout=5,
                cpu_seconds=1,
                memory_mb=256,
                workers=2,
            )
        yield {
            "results": dict(zip(names, results, strict=True)),
            "outside": outside,
            "victim": victim,
            "server": server,
        }
    finally:
        server.close()
        for path in outside.iterdir():
            path.unlink()
        outside.rmdir()


@pytest.mark.parametrize("name", [*HOSTILE, *HOSTILE_NUMPY])
def test_hostile_snippet_is_contained_and_scored_as_failure(attack, name):
    result = attack["results"][name]
    assert not result.ok, f"{name} succeeded: {result.value}"
    assert result.value is None
    expected = EXPECTED_ERROR[name]
    assert any(
        fragment in result.error
        for fragment in ((expected,) if isinstance(expected, str) else expected)
    ), result.error
    category = EXPECTED_CATEGORY.get(name, "refused")
    assert result.category in ((category,) if isinstance(category, str) else category), result.category
    assert len(result.output) <= 65536
    for field in (result.error, result.output):
        assert SECRET_VALUE not in field


def test_hostile_suite_left_the_outside_untouched(attack):
    assert sorted(p.name for p in attack["outside"].iterdir()) == ["secret.env", "victim.txt"]
    assert attack["victim"].read_text() == "original"
    assert stat.S_IMODE(attack["victim"].stat().st_mode) == 0o666
    assert not Path("/tmp/lm-eval-fin-pwned").exists()
    assert not Path("/dev/shm/lm-eval-fin-pwned").exists()


def test_hostile_suite_never_reached_the_socket_server(attack):
    with pytest.raises(BlockingIOError):
        attack["server"].accept()


def test_parent_survived_the_kill_attempts(attack):
    # A kill that got through would have ended this test session before this line.
    kills = ("kill_parent", "killpg_parent", "pidfd_kill_parent", "pidfd_kill_parent_via_rebuilt_modules")
    assert not any(attack["results"][name].ok for name in kills)
    assert Path(f"/proc/{os.getpid()}").exists()


# --- properties: junk in, failure out, parent unharmed -----------------------------------

JUNK_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _could_define_a_function(source) -> bool:
    text = source if isinstance(source, str) else source.decode("utf-8", "replace")
    return "def" in text or "lambda" in text


def _well_formed(result) -> None:
    """What every result must be: ok with a value and no category, or failed with an error
    and one of the categories."""
    assert isinstance(result, ExecResult)
    if result.ok:
        assert (result.error, result.category) == (None, None) and result.value is not None
    else:
        assert result.value is None and result.error and result.category in FAILURE_CATEGORIES


@JUNK_SETTINGS
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes_and_passes_only_with_a_function(source):
    result = run_code(source, timeout=2)
    _well_formed(result)
    assert result.ok is False or _could_define_a_function(source)


@JUNK_SETTINGS
@given(st.binary(max_size=300))
def test_binary_junk_never_crashes(source):
    result = run_code(source, timeout=2)
    _well_formed(result)
    assert result.ok is False or _could_define_a_function(source)


@JUNK_SETTINGS
@given(st.text(alphabet=st.sampled_from("def():\n return x=1lambd#\"'\\ \t"), max_size=80))
def test_near_python_junk_passes_only_when_a_defined_function_returns(source):
    result = run_code(source, timeout=2)
    _well_formed(result)
    if result.ok:
        assert result.value != "None"
        assert _could_define_a_function(source)
    elif "def" not in source and "lambda" not in source:
        # "timeout": the 2 s include the child's start, which a crowded machine can eat
        assert result.category in ("syntax", "no_function", "exception", "timeout")


@JUNK_SETTINGS
@given(
    st.lists(
        st.one_of(st.text(max_size=120), st.binary(max_size=120), st.none(), st.integers()),
        max_size=4,
    )
)
def test_arbitrary_batches_give_one_well_formed_result_each(codes):
    results = run_codes(codes, timeout=2, workers=2)
    assert len(results) == len(codes)
    for result in results:
        _well_formed(result)
    shares = failure_categories(results)
    assert all(0.0 <= share <= 1.0 for share in shares.values())
    if results:
        assert abs(sum(shares.values()) + code_exec_rate(results) - 1.0) < 1e-9


def test_megabyte_of_text_and_nul_bytes_are_failures():
    big = run_code("x" * (1 << 20))
    assert big.error.startswith("NameError") and big.category == "exception"
    result = run_code("def f():\n    return 1\n\x00")
    assert not result.ok and ("null" in result.error or "NUL" in result.error)
    assert result.category == "syntax"


# --- what a rebuilt posix module can create outside, and a full disk ---------------------

# ``os.mkfifo``, ``os.mknod`` and ``os.memfd_create`` raise no audit event, and ``_imp``
# rebuilds a ``posix`` module whatever the snippet's ``os`` holds: the seccomp filter refuses
# the system calls themselves, in every mode.
STRAY_SNIPPET = """
import _imp, importlib.machinery, stat
def f():
    posix = _imp.create_builtin(importlib.machinery.ModuleSpec("posix", None))
    {call}
    return "made"
"""
STRAY_CALLS = {
    "mkfifo_tmp": ("/tmp", "posix.mkfifo({target!r})"),
    "mknod_file_dev_shm": ("/dev/shm", "posix.mknod({target!r}, 0o666 | stat.S_IFREG)"),
    "mkfifo_var_tmp": ("/var/tmp", "posix.mkfifo({target!r})"),
    "mknod_fifo_tmp": ("/tmp", "posix.mknod({target!r}, 0o666 | stat.S_IFIFO)"),
}


def _stray_targets(extra_folder) -> dict:
    tag = os.urandom(4).hex()
    targets = {
        name: (os.path.join(folder, f"lm-eval-fin-stray-{tag}-{name}"), call)
        for name, (folder, call) in STRAY_CALLS.items()
        if os.path.isdir(folder)
    }
    targets["mkfifo_any_folder"] = (f"{extra_folder}/fifo-{tag}", "posix.mkfifo({target!r})")
    targets["mkfifo_own_folder"] = (f"fifo-{tag}", "posix.mkfifo({target!r})")
    return targets


@pytest.mark.parametrize("namespaces", [True, False], ids=["as_probed", "without_namespaces"])
def test_a_rebuilt_posix_module_can_make_nothing_anywhere(namespaces, monkeypatch):
    if not namespaces:
        found = sandbox.isolation()
        monkeypatch.setattr(probe, "_isolation", sandbox.Isolation(
            reason="test: no namespaces", landlock_abi=found.landlock_abi, snippet_uid=found.snippet_uid,
            own_user=found.own_user))  # fmt: skip
    outside = Path(tempfile.mkdtemp(prefix="lm-eval-fin-victim-"))
    outside.chmod(0o777)
    targets = _stray_targets(outside)
    try:
        codes = [STRAY_SNIPPET.format(call=call.format(target=path)) for path, call in targets.values()]
        results = dict(zip(targets, run_codes(codes, workers=2), strict=True))
        left = [path for path, _ in targets.values() if os.path.isabs(path) and os.path.lexists(path)]
        assert left == [] and list(outside.iterdir()) == []
    finally:
        for path, _ in targets.values():
            if os.path.isabs(path) and os.path.lexists(path):
                os.unlink(path)
        shutil.rmtree(outside)
    for name, result in results.items():
        assert not result.ok, name
        assert SECCOMP_REFUSAL in result.error, (name, result.error)


DISK_FILLER_THAT_CATCHES = snippet("""
    import os

    def f():
        written = 0
        try:
            for i in range(50):
                with open(f"big{i}", "wb") as handle:
                    written += handle.write(b"x" * (15 << 20))
        except OSError:
            pass
        return written + sum(os.path.getsize(name) for name in os.listdir("."))
""")


def test_total_disk_use_is_bounded_even_when_the_snippet_carries_on():
    result = run_code(DISK_FILLER_THAT_CATCHES, timeout=20)
    if result.ok:  # namespaces: the full tmpfs stopped the writes, the snippet went on
        assert NAMESPACES
        assert int(result.value) <= 2 * (64 << 20)  # counted twice: written, then on disk
    else:
        assert "wrote more than 64 MB" in result.error


def test_fallback_watchdog_stops_a_disk_filler_and_a_file_flood(monkeypatch):
    monkeypatch.setattr(probe, "_isolation", sandbox.Isolation(reason="test: the fallback"))
    monkeypatch.setattr(runner, "MAX_WORKDIR_ENTRIES", 300)  # file creation can be slow
    for name in ("disk_filler", "many_files"):
        result = run_code(snippet(HOSTILE[name]), timeout=20, disk_mb=32)
        assert not result.ok
        assert result.error == (
            "wrote more than 32 MB or 300 files and folders to its working directory; stopped"
        )
    caught = run_code(DISK_FILLER_THAT_CATCHES, timeout=20, disk_mb=32)
    assert not caught.ok and caught.error.startswith("wrote more than 32 MB")
    hidden = run_code(DELETED_BUT_OPEN, timeout=20, disk_mb=32)
    assert (hidden.error, hidden.category) == (
        "wrote more than 32 MB or 300 files and folders to its working directory; stopped", "resource"
    )


# Files deleted while open: nothing left in the folder to see, 15 MB each held until exit
DELETED_BUT_OPEN = snippet("""
    import os, time

    def f():
        kept = []
        for i in range(10):
            handle = open(f"hidden{i}", "wb")
            handle.write(b"x" * (15 << 20))
            handle.flush()
            os.remove(f"hidden{i}")
            kept.append(handle)
        time.sleep(5)
        return len(kept)
""")


# --- the kernel layers on their own ---------------------------------------------------------

# Each script below installs one layer in a fresh interpreter (no audit hook), then makes the
# calls the layer must refuse and prints what became of each. Signals are signal 0 and
# limits are read, never changed: if a layer let a call through, nothing outside is harmed.
ATTEMPTS = """
import json, os, resource, signal, socket, sys, threading
from lm_eval_fin.sandbox.child import confine, seccomp

outcomes = {}

def attempt(name, action):
    try:
        action()
        outcomes[name] = "done"
    except BaseException as exc:
        outcomes[name] = f"{type(exc).__name__}: {exc}"
"""
SECCOMP_SCRIPT = ATTEMPTS + """
parent, folder = os.getppid(), sys.argv[1]
proc_entry = os.open(f"/proc/{parent}", os.O_RDONLY | os.O_DIRECTORY)
priority, affinity = os.getpriority(os.PRIO_PROCESS, parent), os.sched_getaffinity(parent)
kernel = confine.Kernel()
confine.install_seccomp(kernel, seccomp.seccomp_program(os.uname().machine, os.getpid()))
attempt("kill_self", lambda: os.kill(os.getpid(), 0))
attempt("kill_own_group", lambda: os.kill(0, 0))
attempt("raise_in_self", lambda: signal.raise_signal(signal.SIGWINCH))  # ignored by default
attempt("limit_self", lambda: resource.getrlimit(resource.RLIMIT_NOFILE))
attempt("kill_parent", lambda: os.kill(parent, 0))
attempt("kill_everyone", lambda: os.kill(-1, 0))
attempt("killpg_parent", lambda: os.killpg(os.getpgid(parent), 0))
attempt("pidfd_open_parent", lambda: os.pidfd_open(parent))
attempt("pidfd_send_signal_via_proc", lambda: signal.pidfd_send_signal(proc_entry, 0))
attempt("prlimit_parent", lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE))
attempt("setpriority_parent", lambda: os.setpriority(os.PRIO_PROCESS, parent, priority))
attempt("setaffinity_parent", lambda: os.sched_setaffinity(parent, affinity))
attempt("memfd", lambda: os.memfd_create("hidden"))
attempt("mkfifo", lambda: os.mkfifo(folder + "/fifo"))
attempt("mknod", lambda: os.mknod(folder + "/node"))
attempt("socket", socket.socket)
attempt("fork", os.fork)
attempt("thread", lambda: threading.Thread(target=lambda: None).start())
attempt("execv", lambda: os.execv("/bin/true", ["true"]))
print(json.dumps(outcomes))
"""
EPERM_TEXT = "PermissionError: [Errno 1] Operation not permitted"


def _run_script(script, *args, **kwargs):
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=60,
        cwd=REPOSITORY, **kwargs,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_seccomp_filter_refuses_other_processes_new_programs_memfds_and_sockets(tmp_path):
    outcomes = _run_script(SECCOMP_SCRIPT, tmp_path)
    allowed = ("kill_self", "kill_own_group", "raise_in_self", "limit_self")
    assert {name: outcomes.pop(name) for name in allowed} == dict.fromkeys(allowed, "done")
    assert outcomes.pop("thread") == "RuntimeError: can't start new thread"
    assert outcomes.pop("mkfifo").startswith(EPERM_TEXT) and outcomes.pop("mknod").startswith(EPERM_TEXT)
    assert outcomes == dict.fromkeys(outcomes, EPERM_TEXT)
    assert len(outcomes) == 12 and list(tmp_path.iterdir()) == []


def test_seccomp_program_is_well_formed_and_refuses_unknown_machines():
    program = seccomp.seccomp_program("x86_64", 4242)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096
    instructions = [program[i : i + 8] for i in range(0, len(program), 8)]
    # first: load the architecture; last: allow whatever no rule names
    assert instructions[0] == bytes.fromhex("2000000004000000")
    assert instructions[-1] == (0x06).to_bytes(2, "little") + b"\0\0" + (0x7FFF0000).to_bytes(4, "little")
    assert seccomp.seccomp_program("aarch64", 4242) != program
    with pytest.raises(ValueError, match="knows the system calls of aarch64, arm64, x86_64 only, not sparc"):
        seccomp.seccomp_program("sparc", 4242)


LANDLOCK_SCRIPT = ATTEMPTS + """
import http.server
abi, workdir, outside = int(sys.argv[1]), sys.argv[2], sys.argv[3]
server = socket.create_server(("127.0.0.1", 0))
kernel = confine.Kernel()
confine.apply_landlock(kernel, abi, workdir, confine.landlock_read_paths({"packages": []}))
attempt("write_inside", lambda: open(workdir + "/new.txt", "w").write("ok"))
attempt("read_inside", lambda: open(workdir + "/new.txt").read())
attempt("read_library", lambda: open(json.__file__).read())
attempt("write_outside", lambda: open(outside + "/victim.txt", "a").write("pwned"))
attempt("create_outside", lambda: open(outside + "/new.txt", "w"))
attempt("read_outside", lambda: open(outside + "/secret.txt").read())
attempt("mkdir_outside", lambda: os.mkdir(outside + "/folder"))
attempt("remove_outside", lambda: os.remove(outside + "/victim.txt"))
attempt("move_out", lambda: os.rename(workdir + "/new.txt", outside + "/moved.txt"))
attempt("connect_tcp", lambda: socket.create_connection(server.getsockname(), timeout=2))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
print(json.dumps(outcomes))
"""


@pytest.mark.skipif(not sandbox.isolation().landlock_abi, reason="no Landlock here")
def test_landlock_confines_writes_to_the_working_directory_and_reads_to_the_installation(tmp_path):
    workdir, outside = tmp_path / "work", tmp_path / "outside"
    workdir.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("original")
    (outside / "secret.txt").write_text(SECRET_VALUE)
    abi = sandbox.isolation().landlock_abi
    outcomes = _run_script(LANDLOCK_SCRIPT, abi, workdir, outside)
    assert [outcomes.pop(name) for name in ("write_inside", "read_inside", "read_library")] == ["done"] * 3
    if abi >= 4:
        assert outcomes.pop("connect_tcp").startswith("PermissionError: [Errno 13]")
    if abi >= 6:
        assert outcomes.pop("signal_parent") == EPERM_TEXT
    refused = {name: outcome for name, outcome in outcomes.items() if name not in ("connect_tcp", "signal_parent")}
    assert all(outcome.startswith(("PermissionError: [Errno 13]", "OSError: [Errno 18]")) for outcome in refused.values()), refused
    assert sorted(path.name for path in outside.iterdir()) == ["secret.txt", "victim.txt"]
    assert (outside / "victim.txt").read_text() == "original"


def test_landlock_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(probe, "_isolation", None)
    monkeypatch.setenv(sandbox.NO_LANDLOCK_VARIABLE, "1")
    found = sandbox.isolation()
    assert (found.landlock_abi, found.landlock_reason) == (0, f"turned off by {sandbox.NO_LANDLOCK_VARIABLE}")
    result = run_code("import os\ndef f():\n    return os.getcwd()\n")
    assert result.ok, result.error


def test_a_child_that_cannot_set_up_landlock_makes_the_probe_go_on_without(monkeypatch, caplog):
    monkeypatch.setattr(probe, "_isolation", None)
    # ABI -1 handles no right at all, which landlock_create_ruleset refuses
    monkeypatch.setattr(probe, "_landlock_abi", lambda: (-1, None))
    with caplog.at_level("WARNING", logger="lm_eval_fin.sandbox"):
        found = sandbox.isolation()
    assert found.landlock_abi == 0
    assert "ABI -1: " in found.landlock_reason and "could not set up Landlock" in found.landlock_reason
    assert found.namespaces == NAMESPACES  # the namespaces did not depend on it
    assert "No Landlock (ABI -1: " in caplog.text
    assert run_code("def f():\n    return 2\n").value == "2"


def test_gaps_are_said_plainly():
    full = sandbox.Isolation(namespaces=("mount",), flags=1, landlock_abi=7)
    assert sandbox.isolation_gaps(full) == []
    bare = sandbox.Isolation(reason="not root", landlock_reason="not offered", snippet_uid=1000, own_user=True)
    not_root, no_namespaces, no_landlock = sandbox.isolation_gaps(bare)
    assert "cannot switch to an unprivileged user: snippets run as your own user (uid 1000)" in not_root
    assert "refuses them signals to any other process (yours included)" in not_root
    assert no_namespaces.startswith("No kernel namespaces (not root)")
    assert "only the audit hook keeps snippets from writing files you own outside their folder" in no_landlock


# --- as root without CAP_SYS_ADMIN, and as another user --------------------------------------

CAPSH = shutil.which("capsh")


@pytest.mark.skipif(not (RUNNING_AS_ROOT and CAPSH), reason="needs root and capsh")
def test_root_without_cap_sys_admin_runs_without_namespaces_but_keeps_the_other_layers():
    script = (
        "import json; from lm_eval_fin import sandbox\n"
        "found = sandbox.isolation()\n"
        "result = sandbox.run_code('import os\\ndef f():\\n    return os.getuid()\\n')\n"
        "print(json.dumps([found.namespaces, found.reason, found.landlock_abi, result.value]))\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != sandbox.NO_NAMESPACES_VARIABLE}
    done = subprocess.run(
        [CAPSH, "--drop=cap_sys_admin", "--", "-c", 'exec "$0" "$@"', sys.executable, "-c", script],
        capture_output=True, text=True, timeout=120, env=environment, cwd=REPOSITORY,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    namespaces, reason, landlock_abi, uid = json.loads(done.stdout)
    assert namespaces == [] and "could not set up the namespaces: Operation not permitted (unshare)" in reason
    assert landlock_abi == sandbox.isolation().landlock_abi and uid == "65534"
    assert "No kernel namespaces" in done.stderr  # the warning


OTHER_USER_SCRIPT = """
import json, os, sys
from lm_eval_fin import sandbox

home = sys.argv[1]
rebuilt = "import _imp, importlib.machinery as m\\nposix = _imp.create_builtin(m.ModuleSpec('posix', None))\\n"
attacks = {
    "whoami": "import os\\ndef f():\\n    return os.getuid()\\n",
    "kill_evaluator": "import os\\ndef f():\\n    os.kill(os.getppid(), 9)\\n",
    "pidfd_kill_evaluator": rebuilt + "_signal = _imp.create_builtin(m.ModuleSpec('_signal', None))\\n"
        "import os\\ndef f():\\n    _signal.pidfd_send_signal(posix.pidfd_open(os.getppid()), 9)\\n",
    "mkfifo_in_home": rebuilt + f"def f():\\n    posix.mkfifo({home!r} + '/fifo')\\n",
    "write_in_home": f"def f():\\n    open({home!r} + '/new.txt', 'w')\\n",
    "read_in_home": f"def f():\\n    return open({home!r} + '/secret.txt').read()\\n",
    "limit_evaluator": "import os, resource\\ndef f():\\n    resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (0, 0))\\n",
}
results = sandbox.run_codes(list(attacks.values()), workers=2)
found = sandbox.isolation()
print(json.dumps({
    "uid": os.getuid(),
    "isolation": [found.namespaces, found.landlock_abi, found.snippet_uid, found.own_user],
    "results": {name: [r.ok, r.value, r.error, r.category] for name, r in zip(attacks, results)},
}))
"""


def _interpreter_for(uid: int):
    """A Python that ``uid`` may run and that imports this checkout (ours may live where
    other users cannot read, as under /root here), or None."""
    for candidate in dict.fromkeys([sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]):
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info >= (3, 10); import lm_eval_fin.sandbox"],
                user=uid, group=uid, extra_groups=[], env={"PYTHONPATH": str(REPOSITORY)},
                capture_output=True, timeout=60, cwd=REPOSITORY,
            )  # fmt: skip
        except OSError:  # missing, or not executable by that user
            continue
        if probe.returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(not RUNNING_AS_ROOT, reason="needs root to become another user")
def test_as_a_non_root_user_snippets_cannot_touch_that_user_s_processes_or_files(tmp_path):
    uid = sandbox.UNPRIVILEGED_UID
    interpreter = _interpreter_for(uid)
    if interpreter is None:
        pytest.skip(f"no Python here that uid {uid} may run with this checkout")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "secret.txt").write_text(SECRET_VALUE)
    for path in (home, home / "secret.txt"):
        os.chown(path, uid, uid)
    tmp_path.chmod(0o755)
    done = subprocess.run(
        [interpreter, "-c", OTHER_USER_SCRIPT, str(home)],
        user=uid, group=uid, extra_groups=[], capture_output=True, text=True, timeout=300, cwd=REPOSITORY,
        env={"PYTHONPATH": str(REPOSITORY), "HOME": str(home),
             **{name: os.environ[name] for name in (sandbox.NO_LANDLOCK_VARIABLE,) if name in os.environ}},
    )  # fmt: skip
    # a kill that got through would have ended the evaluator: no report, a negative status
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["uid"] == uid and report["isolation"][0] == [] and report["isolation"][2:] == [uid, True]
    assert report["isolation"][1] == sandbox.isolation().landlock_abi  # Landlock needs no root
    assert "snippets run as your own user (uid 65534)" in done.stderr  # the warning says so
    results = report["results"]
    assert results.pop("whoami")[:2] == [True, str(uid)]  # the same user: nothing to drop to
    assert results["kill_evaluator"][2].startswith("PermissionError: sandbox: os.kill is not allowed")
    for name in ("pidfd_kill_evaluator", "mkfifo_in_home"):
        assert results[name][2].startswith(EPERM_TEXT), results[name]  # the seccomp filter
    assert "is not allowed (only inside the working directory)" in results["write_in_home"][2]
    assert "reading" in results["read_in_home"][2] and SECRET_VALUE not in json.dumps(results)
    assert "resource.prlimit is not allowed" in results["limit_evaluator"][2]
    assert all(not ok for ok, *_ in results.values())
    assert sorted(path.name for path in home.iterdir()) == ["secret.txt"]
