"""lm_eval_fin.sandbox: FinLFQA's code-execution rules, and containment of hostile snippets.

Every snippet runs in a real child process. The hostile suite runs once per module (in
parallel, through run_codes) and each test then checks one attack: contained, scored as a
failure, and failed for the reason the layer in charge gives, so that a snippet failing by
accident (a typo in the attack) cannot pass for containment.
"""

import importlib.util
import os
import socket
import stat
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_fin import sandbox
from lm_eval_fin.sandbox import (
    ExecResult,
    Limits,
    SandboxError,
    code_exec_rate,
    run_code,
    run_codes,
)

SECRET_NAME = "LM_EVAL_FIN_TEST_SECRET"
SECRET_VALUE = "s3cr3t-token-4242"
RUNNING_AS_ROOT = os.geteuid() == 0


def snippet(source: str) -> str:
    return textwrap.dedent(source).strip() + "\n"


# --- the FinLFQA rules: hand cases -------------------------------------------------------


def test_function_returning_a_number_passes():
    code = "def revenue_growth():\n    return (150 - 120) / 120\n"
    result = run_code(code)
    assert (result.ok, result.value, result.error, result.output) == (True, "0.25", None, "")
    assert result.duration_s > 0


def test_function_with_parameters_called_without_arguments_fails():
    result = run_code("def growth(current, previous):\n    return current / previous - 1\n")
    assert not result.ok and result.value is None
    assert "missing 2 required positional arguments" in result.error


def test_function_without_return_fails():
    result = run_code("def margin():\n    value = 3 / 4\n")
    assert not result.ok
    assert result.error == "margin() returned None"


def test_indentation_error_fails():
    result = run_code("def f():\n    x = 1\n      return x\n")
    assert not result.ok
    assert result.error.startswith("IndentationError: unexpected indent")
    assert "line 3" in result.error


def test_syntax_error_fails():
    result = run_code("def f(:\n    return 1\n")
    assert not result.ok and result.error.startswith("SyntaxError")


def test_code_without_function_fails_even_if_it_computes():
    result = run_code("total = 1 + 2\nprint(total)\n")
    assert not result.ok
    assert result.error.startswith("no function defined")
    assert result.output == "3\n"


def test_exception_names_type_message_and_line():
    result = run_code("def ratio():\n    debt = 10\n    return debt / 0\n")
    assert result.error == "ZeroDivisionError: division by zero (line 3)"


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


def test_third_party_packages_are_not_importable():
    result = run_code("import numpy\ndef f():\n    return 1\n")
    assert not result.ok and "ModuleNotFoundError" in result.error


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


def test_exit_calls_are_failures():
    assert run_code("import sys\ndef f():\n    sys.exit(0)\n").error == "SystemExit: 0 (line 3)"
    result = run_code("import os\ndef f():\n    os._exit(0)\n")
    assert result.error == "the child exited with status 0 without a result"


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


def test_child_runs_with_empty_environment_and_unprivileged_when_root():
    code = "import os\ndef f():\n    return os.getuid(), os.getgid(), sorted(os.environ)\n"
    uid, gid, names = eval(run_code(code).value)
    if RUNNING_AS_ROOT:
        assert (uid, gid) == (65534, 65534)
    else:
        assert uid == os.getuid()
    assert set(names) <= {"LC_CTYPE"}  # Python's own C-locale coercion, nothing inherited


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


def test_cpu_limit_stops_a_busy_loop_before_the_wall_clock_does():
    result = run_code("def f():\n    while True:\n        pass\n", timeout=60, cpu_seconds=1)
    assert result.error == "CPU time limit (1 s) exceeded"


def test_file_size_limit_stops_big_writes():
    code = (
        "def f():\n    with open('big', 'wb') as out:\n        return out.write(b'x' * (2 << 20))\n"
    )
    result = run_code(code, file_size_mb=1)
    assert not result.ok and "File too large" in result.error


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
    monkeypatch.setattr(sandbox, "CHILD_SCRIPT", broken_child)
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
    monkeypatch.setattr(sandbox, "_isolation", None)
    monkeypatch.delenv(sandbox.NO_NAMESPACES_VARIABLE, raising=False)
    # CSIGNAL bits are not unshare(2) flags: EINVAL, as any refusal would be
    monkeypatch.setattr(sandbox, "NAMESPACE_CHOICES", ((("mount",), sandbox.CLONE_NEWNS | 1),))
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
    monkeypatch.setattr(sandbox, "_isolation", None)
    monkeypatch.setenv(sandbox.NO_NAMESPACES_VARIABLE, "1")
    assert sandbox.isolation().reason == f"turned off by {sandbox.NO_NAMESPACES_VARIABLE}"


def test_code_exec_rate_is_micro_and_zero_without_snippets():
    ok, failed = ExecResult(ok=True, value="1"), ExecResult(ok=False, error="x")
    assert code_exec_rate([ok, failed, failed, ok]) == 0.5
    assert code_exec_rate([ok]) == 1.0
    assert code_exec_rate([]) == 0.0
    assert code_exec_rate(iter([failed])) == 0.0


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
    "fork_exec_via_imp": """
        import _imp, importlib.machinery
        def f():
            spec = importlib.machinery.ModuleSpec("_posixsubprocess", None, origin=EXTENSIONS["_posixsubprocess"])
            return _imp.create_dynamic(spec).fork_exec
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
        import _imp, importlib.machinery
        def f():
            spec = importlib.machinery.ModuleSpec("_socket", None, origin=EXTENSIONS["_socket"])
            _socket = _imp.create_dynamic(spec)
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
    "ctypes": """
        import ctypes
        def f():
            return ctypes.string_at(0, 8)
    """,
    "ctypes_via_imp": """
        import _imp, importlib.machinery
        def f():
            spec = importlib.machinery.ModuleSpec("_ctypes", None, origin=EXTENSIONS["_ctypes"])
            return _imp.create_dynamic(spec)
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

# The layer that must have stopped each attack, as it appears in the error (or one of these).
OUTSIDE_WORKDIR = "is not allowed (only inside the working directory)"
EXPECTED_ERROR = {
    "fork_bomb": "os.fork is not allowed",
    "thread_bomb": "can't start new thread",
    "subprocess": "importing subprocess is not allowed",
    "fork_exec_via_imp": "importing _posixsubprocess is not allowed",
    "os_system": "os.system is not allowed",
    "memory_bomb": ("MemoryError", "timed out"),  # on a crowded machine the clock may win
    "memory_bomb_single": "MemoryError",
    "busy_loop": ("CPU time limit (1 s) exceeded", "timed out"),  # whichever comes first
    "write_outside": OUTSIDE_WORKDIR,
    "append_outside_os_open": OUTSIDE_WORKDIR,
    "write_outside_pathlib": OUTSIDE_WORKDIR,
    "write_relative_to_another_folder": "os.open needs an absolute path",
    "write_after_patching_builtins_and_os_path": OUTSIDE_WORKDIR,
    "rewrite_hook_defaults_from_traceback": "changing a function's code or defaults is not allowed",
    "gc_walk": "gc.get_objects is not allowed",
    "proc_self_mem": "writing '/proc/self/mem' is not allowed",
    "delete_outside": "os.remove on",
    "rename_outside": "os.rename on",
    "rmtree_outside": "shutil.rmtree is not allowed",
    "chdir_then_write": "os.chdir is not allowed",
    "mkfifo_outside": "module 'os' has no attribute 'mkfifo'",
    "mknod_outside": "module 'os' has no attribute 'mknod'",
    "memfd": "module 'os' has no attribute 'memfd_create'",
    # the tmpfs is full (namespaces), or the parent's watchdog stopped it (fallback)
    "disk_filler": ("No space left on device", "wrote more than 64 MB"),
    # creating files is slow on some disks: the CPU limit may come first in the fallback
    "many_files": ("No space left on device", "4096 files and folders", "CPU time limit"),
    "symlink_out_of_workdir": "os.symlink is not allowed",
    "read_secret_env": f"KeyError: '{SECRET_NAME}'",
    "read_parent_environ": "/environ' is not allowed",
    "read_secret_file": "is not allowed (only the working directory and the standard library)",
    "socket_connect": "importing socket is not allowed",
    "socket_via_imp": "importing _socket is not allowed",
    "huge_output": "printed more than 65536 bytes",
    "huge_stderr": "printed more than 65536 bytes",
    "kill_parent": "os.kill is not allowed",
    "killpg_parent": "os.killpg is not allowed",
    "pidfd_kill_parent": "has no attribute 'pidfd_send_signal'",
    "ctypes": "importing ctypes is not allowed",
    "ctypes_via_imp": "importing _ctypes is not allowed",
    "recursion": "RecursionError",
    "deep_recursion_without_limit": "",  # CPU, memory or stack: whichever comes first
    "forge_result_record": "without a result",
    "raise_limits": "resource.setrlimit is not allowed",
    "become_root": "PermissionError",
}


# Extension modules the *_via_imp attacks load with _imp.create_dynamic. Their paths come from
# this (unsandboxed) process: inside the sandbox, sys.path holds /proc/self/fd/N entries on
# which a path finder may find nothing, and the attack must reach the import guard itself.
IMP_ATTACK_EXTENSIONS = ("_posixsubprocess", "_socket", "_ctypes")


def extension_paths(names):
    paths = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin and os.path.isfile(spec.origin), f"no extension file for {name}"
        paths[name] = spec.origin
    return paths


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
        f"EXTENSIONS = {extension_paths(IMP_ATTACK_EXTENSIONS)!r}\n"
    )
    names = list(HOSTILE)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(SECRET_NAME, SECRET_VALUE)
            results = run_codes(
                [prelude + snippet(HOSTILE[name]) for name in names],
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


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_snippet_is_contained_and_scored_as_failure(attack, name):
    result = attack["results"][name]
    assert not result.ok, f"{name} succeeded: {result.value}"
    assert result.value is None
    expected = EXPECTED_ERROR[name]
    assert any(
        fragment in result.error
        for fragment in ((expected,) if isinstance(expected, str) else expected)
    ), result.error
    assert len(result.output) <= 65536
    for field in (result.error, result.output):
        assert SECRET_VALUE not in field


def test_hostile_suite_left_the_outside_untouched(attack):
    assert sorted(p.name for p in attack["outside"].iterdir()) == ["secret.env", "victim.txt"]
    assert attack["victim"].read_text() == "original"
    assert stat.S_IMODE(attack["victim"].stat().st_mode) == 0o666
    assert not Path("/tmp/lm-eval-fin-pwned").exists()


def test_hostile_suite_never_reached_the_socket_server(attack):
    with pytest.raises(BlockingIOError):
        attack["server"].accept()


def test_parent_survived_the_kill_attempts(attack):
    # A kill that got through would have ended this test session before this line.
    kills = ("kill_parent", "killpg_parent", "pidfd_kill_parent")
    assert not any(attack["results"][name].ok for name in kills)
    assert Path(f"/proc/{os.getpid()}").exists()


# --- properties: junk in, failure out, parent unharmed -----------------------------------

JUNK_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _could_define_a_function(source) -> bool:
    text = source if isinstance(source, str) else source.decode("utf-8", "replace")
    return "def" in text or "lambda" in text


@JUNK_SETTINGS
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes_and_passes_only_with_a_function(source):
    result = run_code(source, timeout=2)
    assert isinstance(result, ExecResult)
    assert result.ok is False or _could_define_a_function(source)
    assert (result.error is None) == result.ok


@JUNK_SETTINGS
@given(st.binary(max_size=300))
def test_binary_junk_never_crashes(source):
    result = run_code(source, timeout=2)
    assert result.ok is False or _could_define_a_function(source)
    assert (result.error is None) == result.ok


@JUNK_SETTINGS
@given(st.text(alphabet=st.sampled_from("def():\n return x=1lambd#\"'\\ \t"), max_size=80))
def test_near_python_junk_passes_only_when_a_defined_function_returns(source):
    result = run_code(source, timeout=2)
    if result.ok:
        assert result.value is not None and result.value != "None"
        assert _could_define_a_function(source)


def test_megabyte_of_text_and_nul_bytes_are_failures():
    assert run_code("x" * (1 << 20)).error.startswith("NameError")
    result = run_code("def f():\n    return 1\n\x00")
    assert not result.ok and ("null" in result.error or "NUL" in result.error)


# --- what a rebuilt posix module can create outside, and a full disk ---------------------

# ``os.mkfifo`` and ``os.mknod`` are removed (see the hostile suite); ``_imp`` rebuilds a
# ``posix`` module that still has them, and they raise no audit event.
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


def _stray_targets(extra_folder=None) -> dict:
    tag = os.urandom(4).hex()
    targets = {
        name: (os.path.join(folder, f"lm-eval-fin-stray-{tag}-{name}"), call)
        for name, (folder, call) in STRAY_CALLS.items()
        if os.path.isdir(folder)
    }
    if extra_folder is not None:
        targets["mkfifo_any_folder"] = (f"{extra_folder}/fifo-{tag}", "posix.mkfifo({target!r})")
    return targets


def _run_strays(targets: dict) -> dict:
    codes = [STRAY_SNIPPET.format(call=call.format(target=path)) for path, call in targets.values()]
    return dict(zip(targets, run_codes(codes, workers=2), strict=True))


def _remove_leftovers(targets: dict) -> list:
    left = [path for path, _ in targets.values() if os.path.lexists(path)]
    for path in left:
        os.unlink(path)
    return left


@pytest.mark.skipif(not RUNNING_AS_ROOT and not NAMESPACES, reason="nothing removes them here")
def test_nothing_a_rebuilt_posix_module_makes_outside_survives():
    outside = Path(tempfile.mkdtemp(prefix="lm-eval-fin-victim-"))
    outside.chmod(0o777)
    # any world-writable folder with namespaces; only the known ones in the fallback
    targets = _stray_targets(outside if NAMESPACES else None)
    try:
        results = _run_strays(targets)
        assert _remove_leftovers(targets) == []
        assert list(outside.iterdir()) == []
    finally:
        _remove_leftovers(targets)
        for path in outside.iterdir():
            path.unlink()
        outside.rmdir()
    if NAMESPACES:  # nothing was even created: every mount is read-only
        for name, result in results.items():
            assert not result.ok, name
            assert "Read-only file system" in result.error, (name, result.error)


@pytest.mark.skipif(not RUNNING_AS_ROOT, reason="the fallback removes strays only as root")
def test_fallback_removes_what_a_rebuilt_posix_module_made(monkeypatch):
    monkeypatch.setattr(sandbox, "_isolation", sandbox.Isolation(reason="test: the fallback"))
    targets = _stray_targets()
    try:
        results = _run_strays(targets)
        assert _remove_leftovers(targets) == []
    finally:
        _remove_leftovers(targets)
    # they were made (and may score as a success); what matters is that none is left
    assert all(result.ok or "Errno" in result.error for result in results.values())


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
    monkeypatch.setattr(sandbox, "_isolation", sandbox.Isolation(reason="test: the fallback"))
    monkeypatch.setattr(sandbox, "MAX_WORKDIR_ENTRIES", 300)  # file creation can be slow
    for name in ("disk_filler", "many_files"):
        result = run_code(snippet(HOSTILE[name]), timeout=20, disk_mb=32)
        assert not result.ok
        assert result.error == (
            "wrote more than 32 MB or 300 files and folders to its working directory; stopped"
        )
    caught = run_code(DISK_FILLER_THAT_CATCHES, timeout=20, disk_mb=32)
    assert not caught.ok and caught.error.startswith("wrote more than 32 MB")
