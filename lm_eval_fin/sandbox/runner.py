"""Start one sandbox child for one snippet, and read its verdict.

The child's code is :mod:`lm_eval_fin.sandbox.child`, compiled here once and sent to each
child with its job; :mod:`lm_eval_fin.sandbox.watchdog` watches the run.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import marshal
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import child
from .child.snippet import FAILURE_CATEGORIES
from .confinement import UNPRIVILEGED_UID, Isolation, Limits
from .results import ExecResult, SandboxError
from .watchdog import ChildRun, end_session, over_disk, watch

# The child's whole environment: numerical libraries run one thread (threads are refused).
CHILD_ENVIRONMENT = {
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}  # fmt: skip
# What snippets may import besides the standard library: numpy and pandas, as FinLFQA's
# model code expects, and what pandas needs (distribution names; the absent are skipped).
OFFERED_DISTRIBUTIONS = ("numpy", "pandas", "python-dateutil", "six", "pytz", "tzdata")
MAX_TEXT_CHARS = 4096  # longest value repr or error message kept
MAX_WORKDIR_ENTRIES = 4096  # files and folders the working directory may hold
MAX_OPEN_FILES = 64  # descriptors the child may hold at once
WORKDIR_PREFIX = "lm-eval-fin-sandbox-"
# The child's modules, (name, file) in the order the stub runs them (child.MODULES). Runs
# use CHILD_MODULES, which a test may replace with a broken child; the probe always runs the
# shipped ones.
SHIPPED_CHILD_MODULES = tuple((name, Path(child.__file__).with_name(f"{name}.py")) for name in child.MODULES)
CHILD_MODULES = SHIPPED_CHILD_MODULES


@functools.cache
def _compiled(modules: tuple) -> list:
    """(name, code object) of each child module: compiled once per process and sent to
    every child, which cannot import them (and would pay for compiling them each time)."""
    return [
        (name, compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True))
        for name, path in modules
    ]


def run_in_child(code: str | bytes, limits: Limits, kernel: Isolation, modules: tuple | None = None) -> ExecResult:
    """Run ``code`` (a snippet, already str or bytes) in one fresh child under ``limits`` and
    ``kernel``'s isolation, with the child made of ``modules`` (default
    :data:`CHILD_MODULES`). Raises :class:`SandboxError` only when the child could not set
    itself up."""
    started = time.monotonic()
    drop_to_uid = UNPRIVILEGED_UID if os.geteuid() == 0 else None
    try:
        workdir = os.path.realpath(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    except OSError as exc:
        raise SandboxError(f"cannot create the sandbox's working directory: {exc}") from exc
    token = secrets.token_hex(16)
    result_read = result_write = None
    try:
        result_read, result_write = os.pipe()
        if drop_to_uid is not None:
            os.chown(workdir, drop_to_uid, drop_to_uid)
        job = _job(workdir, drop_to_uid, result_write, token, limits, kernel)
        job["code"] = code
        child = _start_child(workdir, result_write)
        os.close(result_write)
        result_write = None
        # Without a tmpfs of bounded size (namespaces), the parent measures the directory.
        disk_check = None if kernel.namespaces else functools.partial(over_disk, workdir, limits, MAX_WORKDIR_ENTRIES, child.pid)
        try:
            message = marshal.dumps((_compiled(modules or CHILD_MODULES), job))
            record_cap = 4 * MAX_TEXT_CHARS + 1024  # the text as UTF-8, the tokens, status and category
            run = watch(child, message, result_read, started + limits.timeout, limits, record_cap, disk_check)
        finally:
            end_session(child)
        if disk_check is not None and not (run.timed_out or run.output_overflow):
            # the folder only: the child is reaped, and its pid may be another process's now
            run.disk_exceeded = run.disk_exceeded or over_disk(workdir, limits, MAX_WORKDIR_ENTRIES)
        return _verdict(run, child.returncode, token, limits, time.monotonic() - started)
    except OSError as exc:  # the parent's own set-up (pipes, processes), not the snippet
        raise SandboxError(f"cannot start the sandbox child: {exc}") from exc
    finally:
        for fd in (result_read, result_write):
            if fd is not None:
                os.close(fd)
        _remove_tree(workdir)


def _job(workdir, drop_to_uid, result_fd, token, limits: Limits, kernel: Isolation) -> dict:
    return {
        "workdir": workdir,
        "drop_to_uid": drop_to_uid,
        "result_fd": result_fd,
        "token": token,
        "memory_bytes": int(limits.memory_mb * (1 << 20)),
        "cpu_seconds": limits.cpu_limit,
        "file_size_bytes": int(limits.file_size_mb * (1 << 20)),
        "disk_bytes": limits.disk_bytes,
        "max_entries": MAX_WORKDIR_ENTRIES,
        "max_open_files": MAX_OPEN_FILES,
        "max_text_chars": MAX_TEXT_CHARS,
        "namespaces": kernel.flags,
        "landlock_abi": kernel.landlock_abi,
        "packages": offered_packages(),
        "stub": child.STUB,
    }


def _start_child(workdir: str, result_write: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", child.STUB],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=CHILD_ENVIRONMENT,
        pass_fds=(result_write,),
        start_new_session=True,
    )


@functools.cache
def offered_packages() -> tuple[tuple[str | None, str], ...]:
    """What snippets may import besides the standard library: (import name, path) of each
    top-level package or module of the installed :data:`OFFERED_DISTRIBUTIONS`, and (None,
    path) of their other top-level folders (``numpy.libs``: libraries the extensions load),
    which may be read but not imported. Found once, from the installed files' records."""
    offered = {}
    for distribution_name in OFFERED_DISTRIBUTIONS:
        try:
            distribution = importlib.metadata.distribution(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for top in {file.parts[0] for file in distribution.files or () if file.parts}:
            if top in ("..", "__pycache__") or top.endswith((".dist-info", ".egg-info", ".data", ".pth")):
                continue
            path = os.path.realpath(str(distribution.locate_file(top)))
            if os.path.isdir(path):
                name = top if os.path.isfile(os.path.join(path, "__init__.py")) else None
            elif top.endswith(".py"):
                name = top[: -len(".py")]
            elif top.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                name = top.split(".", 1)[0]
            else:
                continue
            offered[path] = name
    return tuple(sorted(((name, path) for path, name in offered.items()), key=lambda item: item[1]))


def _verdict(
    run: ChildRun, returncode: int, token: str, limits: Limits, duration: float
) -> ExecResult:
    output_text = run.output.decode("utf-8", "replace")
    done = functools.partial(ExecResult, output=output_text, duration_s=duration)
    if run.timed_out:
        return done(ok=False, error=f"timed out after {limits.timeout:g} s (wall clock)", category="timeout")
    if run.output_overflow:
        return done(
            ok=False, error=f"printed more than {limits.max_output_bytes} bytes; stopped", category="resource"
        )
    if run.disk_exceeded:
        return done(
            ok=False,
            error=f"wrote more than {limits.disk_mb:g} MB or {MAX_WORKDIR_ENTRIES} files and "
            "folders to its working directory; stopped",
            category="resource",
        )
    ready_token, _, record = run.record.decode("utf-8", "replace").partition("\n")
    if ready_token != token:
        raise SandboxError(
            f"the sandbox child failed before running the snippet (exit status {returncode}): "
            + (output_text[-2000:] or "no output")
        )
    # The outcome repeats the token, so that bytes the snippet itself wrote to the result
    # pipe cannot pass for one.
    outcome_token, status, category, text = (record.split("\n", 3) + ["", "", ""])[:4]
    if outcome_token == token and status == "ok":
        return done(ok=True, value=text)
    if outcome_token == token and status == "error":
        return done(ok=False, error=text, category=category if category in FAILURE_CATEGORIES else "exception")
    if returncode < 0:
        return done(ok=False, error=_signal_error(-returncode, limits), category=_signal_category(-returncode))
    return done(
        ok=False, error=f"the child exited with status {returncode} without a result", category="exception"
    )


def _signal_error(signum: int, limits: Limits) -> str:
    # The parent kills only on timeout or output overflow, reported before this; any other
    # fatal signal came from the kernel or from the snippet itself.
    if signum == signal.SIGXCPU:
        return f"CPU time limit ({limits.cpu_limit} s) exceeded"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    hint = " (CPU time hard limit, or out of memory)" if signum == signal.SIGKILL else ""
    return f"the child was killed by {name}{hint}"


def _signal_category(signum: int) -> str:
    # SIGKILL: the CPU hard limit (SIGXCPU ignored) or the kernel out of memory; any other
    # signal (a crash, or one the snippet sent itself) is its code's failure
    if signum == signal.SIGXCPU:
        return "timeout"
    return "resource" if signum == signal.SIGKILL else "exception"


def _remove_tree(path: str) -> None:
    """Remove the working directory. A snippet may have made folders it cannot enter
    (``os.mkdir(name, 0)``); unless root, the parent must open them up before removing."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.exists(path):
        return
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)
