"""Run model-written Python snippets in throwaway, locked-down child processes.

FinLFQA scores the code a model writes by whether it runs (DESIGN.md, "Code execution
rate"): a snippet passes when it defines a function that, called with no arguments, returns
a value other than None within the limits. :func:`run_code` runs one snippet that way,
:func:`run_codes` many in parallel, :func:`code_exec_rate` turns results into the rate.

Which function is called: the one the snippet defines last at the top level (``def`` or a
``lambda`` bound to a name), by line; helpers usually come first. The snippet runs as a
``__main__`` module, so an ``if __name__ == "__main__":`` block runs too (before the call).
Only the standard library can be imported: the child starts with ``-I -S``.

Model code is hostile, so every snippet runs in its own fresh child process
(``_sandbox_child.py``) behind these layers, outermost first:

1. Process. ``python -I -S`` (no site-packages, no user site, ``PYTHON*`` variables
   ignored) in a new session, with an empty environment, no inherited descriptors but its
   pipes, and a fresh temporary working directory that is removed afterwards.
2. Kernel limits, set with ``setrlimit`` before the snippet exists: address space, CPU
   seconds, size of any file written, no new processes or threads (``RLIMIT_NPROC`` 0),
   no core files.
3. Unprivileged user. Run as root (these machines and CI are), the child switches to uid
   and gid 65534 after the interpreter has started, since root ignores ``RLIMIT_NPROC``,
   writes anywhere and signals anyone. The interpreter lives where that user may not read
   (under /root here), so the child opens the standard library's folders first and imports
   through those descriptors (``/proc/self/fd/N``) afterwards.
4. Audit hook (``sys.addaudithook``; Python code cannot remove it). It refuses: new
   processes and signals (``os.fork``/``exec``/``spawn``/``system``, ``subprocess``,
   ``os.kill``); sockets; ``ctypes``; opening files for writing outside the working
   directory, and for reading outside it, the standard library and a few shared files
   (``/dev/null``, ``/dev/urandom``, zoneinfo), so that neither ``/proc/<parent>/environ``
   nor ``/proc/self/mem`` opens; ``os.open`` with a relative path (a ``dir_fd`` the hook
   cannot see could point anywhere); creating, removing or renaming anything outside the
   working directory, and links, ``chmod`` and ``chdir`` anywhere; raising limits;
   tracing, ``gc`` object walks, hand-made code objects, rewriting a function's code or
   defaults; importing the modules that give these powers. The hook binds all it uses when
   it is installed and never calls the snippet's code, so rebinding names in ``builtins``,
   ``os`` or ``sys.modules`` does not change its decisions. ``os.mkfifo``, ``os.mknod``,
   ``os.pidfd_open`` and ``signal.pidfd_send_signal`` raise no audit event, so they are
   removed from their modules.
5. Parent. A wall-clock deadline (the whole child, start-up included); captured output is
   capped and the child stopped beyond the cap; the child's whole session is killed when it
   ends or times out (forked descendants would keep the pipes open); nothing the snippet
   does raises in the parent. A sandbox that cannot start (before any snippet code runs)
   raises :class:`SandboxError` rather than scoring every snippet as a failure.

What stays open, knowingly:

- CPython documents audit hooks as no security boundary. Code that corrupts the
  interpreter's memory (through some CPython bug; ``ctypes`` and ``/proc/self/mem`` are
  refused) gets past layer 4, not past layers 1-3. ``_imp.create_builtin`` can rebuild
  ``posix`` and ``_signal`` with the removed calls; as uid 65534 that creates at most an
  empty file or FIFO in a world-writable folder such as /tmp, and signals nobody else's
  processes.
- Not run as root, layer 3 is missing: the child runs as you, and layer 4 alone keeps it
  from your files and processes (the ``_imp`` route above reaches them). Run untrusted code
  as root (the child then drops to uid 65534) or inside a container.
- The network is closed by layer 4 only; there is no network namespace.
- A snippet written against this module's internals can read its result token from the
  child's stack frames and fake its own success; that changes its score, nothing outside.
"""

from __future__ import annotations

import functools
import marshal
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CHILD_SCRIPT = Path(__file__).with_name("_sandbox_child.py")
# What the child interpreter runs: read the message from stdin, run the child module's code
# and hand it the job. The code is compiled once here and sent along: compiling it in every
# child was most of the sandbox's own cost per snippet.
CHILD_STUB = """\
import marshal, os
chunks = []
while chunk := os.read(0, 1 << 16):
    chunks.append(chunk)
child_code, job = marshal.loads(b"".join(chunks))
del chunks
child = {"__name__": "_sandbox_child"}
exec(child_code, child)
child["main"](job)
"""
UNPRIVILEGED_UID = 65534  # "nobody"; also used as the gid
MAX_TEXT_CHARS = 4096  # longest value repr or error message kept
_READ_CHUNK = 1 << 16


class SandboxError(RuntimeError):
    """The sandbox itself could not start (before any snippet code ran): a broken
    environment or limits too tight for the interpreter, never something a snippet did."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one snippet.

    ``ok``: the function ran and returned something other than None. ``value``: repr of
    that return value (cut to :data:`MAX_TEXT_CHARS`), None otherwise. ``error``: why it
    failed, None when ``ok``. ``output``: what the snippet printed (stdout and stderr
    together, up to ``max_output_bytes``). ``duration_s``: wall-clock seconds, child
    start-up included.
    """

    ok: bool
    value: str | None = None
    error: str | None = None
    output: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class Limits:
    """What one snippet may use; :func:`run_code` and :func:`run_codes` take these fields
    as keyword arguments.

    ``timeout``: wall-clock seconds for the whole child, start-up included. ``memory_mb``:
    address space. ``cpu_seconds``: CPU time, in whole seconds rounded up (default: the
    timeout). ``file_size_mb``: largest file it may write (in its working directory, the
    only place it may write). ``max_output_bytes``: printing more stops the snippet, a
    failure.
    """

    timeout: float = 5.0
    memory_mb: int = 512
    cpu_seconds: float | None = None
    file_size_mb: int = 16
    max_output_bytes: int = 64 * 1024

    def __post_init__(self):
        for name in ("timeout", "memory_mb", "file_size_mb", "max_output_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.cpu_seconds is not None and not self.cpu_seconds > 0:
            raise ValueError(f"cpu_seconds must be positive, got {self.cpu_seconds!r}")

    @property
    def cpu_limit(self) -> int:
        return max(1, math.ceil(self.cpu_seconds if self.cpu_seconds is not None else self.timeout))


def run_code(code: str | bytes, timeout: float = 5.0, **limits) -> ExecResult:
    """Run one snippet in a fresh sandboxed child and call the function it defines.

    ``limits``: the other fields of :class:`Limits`. Whatever the snippet does comes back
    as an :class:`ExecResult` (so does code that is not a str or bytes). Raises only for
    invalid limits, or :class:`SandboxError` when the sandbox itself cannot start.
    """
    return _run(code, Limits(timeout=timeout, **limits))


def run_codes(
    codes: Sequence[str | bytes], timeout: float = 5.0, workers: int | None = None, **limits
) -> list[ExecResult]:
    """:func:`run_code` for each snippet, ``workers`` at a time (default: CPU count).

    Results come in the order of ``codes``; each snippet still gets its own fresh child.
    """
    settings = Limits(timeout=timeout, **limits)
    codes = list(codes)
    workers = max(1, min(workers or os.cpu_count() or 1, len(codes) or 1))
    if workers == 1:
        return [_run(code, settings) for code in codes]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda code: _run(code, settings), codes))


def code_exec_rate(results: Iterable[ExecResult]) -> float:
    """Share of snippets that ran (micro over all snippets). No snippets at all: 0.0, since
    a model that wrote no code earned no credit; report the snippet count beside it."""
    results = list(results)
    return sum(result.ok for result in results) / len(results) if results else 0.0


@functools.cache
def _compiled(script: Path):
    return compile(script.read_text(encoding="utf-8"), str(script), "exec", dont_inherit=True)


def _run(code, limits: Limits) -> ExecResult:
    if isinstance(code, str):  # subclasses too (numpy.str_ from a dataset), as a plain str
        return _run_in_child(str.__str__(code), limits)
    if isinstance(code, bytes):
        return _run_in_child(bytes(memoryview(code)), limits)
    return ExecResult(ok=False, error=f"not code: expected str or bytes, got {type(code).__name__}")


def _run_in_child(code: str | bytes, limits: Limits) -> ExecResult:
    started = time.monotonic()
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="lm-eval-fin-sandbox-"))
    drop_to_uid = UNPRIVILEGED_UID if os.geteuid() == 0 else None
    token = secrets.token_hex(16)
    result_read, result_write = os.pipe()
    try:
        if drop_to_uid is not None:
            os.chown(workdir, drop_to_uid, drop_to_uid)
        job = {
            "code": code,
            "workdir": workdir,
            "drop_to_uid": drop_to_uid,
            "result_fd": result_write,
            "token": token,
            "memory_bytes": int(limits.memory_mb * (1 << 20)),
            "cpu_seconds": limits.cpu_limit,
            "file_size_bytes": int(limits.file_size_mb * (1 << 20)),
            "max_text_chars": MAX_TEXT_CHARS,
        }
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", CHILD_STUB],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={},
            pass_fds=(result_write,),
            start_new_session=True,
        )
        os.close(result_write)
        result_write = None
        try:
            message = marshal.dumps((_compiled(CHILD_SCRIPT), job))
            run = _watch(child, message, result_read, started + limits.timeout, limits)
        finally:
            _end_session(child)
        return _verdict(run, child.returncode, token, limits, time.monotonic() - started)
    finally:
        for fd in (result_read, result_write):
            if fd is not None:
                os.close(fd)
        _remove_tree(workdir)


@dataclass
class _ChildRun:
    """What the parent saw of one child."""

    output: bytearray
    record: bytearray
    timed_out: bool = False
    output_overflow: bool = False


def _watch(
    child: subprocess.Popen, job: bytes, result_read: int, deadline: float, limits: Limits
) -> _ChildRun:
    """Hand the job over (the child reads it first thing), then collect output and the
    result record until the child exits, the deadline passes or the output cap is hit.
    Reads are bounded in size and never wait past the deadline."""
    run = _ChildRun(output=bytearray(), record=bytearray())
    try:
        child.stdin.write(job)
        child.stdin.close()
    except OSError:  # the child died before reading its job; its exit status tells why
        pass
    caps = {"output": limits.max_output_bytes + 1, "record": 4 * MAX_TEXT_CHARS + 1024}
    try:
        exit_fd = os.pidfd_open(child.pid)  # readable once the child has exited
    except (AttributeError, OSError):  # not Linux >= 5.3: poll instead
        exit_fd = None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout.fileno(), selectors.EVENT_READ, "output")
        selector.register(result_read, selectors.EVENT_READ, "record")
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ, "exit")
        try:
            exited = False
            while not exited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    run.timed_out = True
                    break
                events = selector.select(remaining if exit_fd is not None else min(remaining, 0.01))
                for key, _ in events:
                    if key.data == "exit":
                        exited = True
                        continue
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if not chunk:  # end of file; descendants could still hold the pipe
                        selector.unregister(key.fd)
                    else:
                        sink = getattr(run, key.data)
                        sink += chunk[: caps[key.data] - len(sink)]
                if len(run.output) > limits.max_output_bytes:
                    run.output_overflow = True
                    break
                exited = exited or (exit_fd is None and child.poll() is not None)
            if exited:  # collect what the child wrote just before it exited
                for key in list(selector.get_map().values()):
                    if key.data != "exit":
                        _drain(key.fd, getattr(run, key.data), caps[key.data])
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
    run.output_overflow = run.output_overflow or len(run.output) > limits.max_output_bytes
    del run.output[limits.max_output_bytes :]
    return run


def _drain(fd: int, sink: bytearray, cap: int) -> None:
    """Read what is already in a pipe without waiting for more."""
    os.set_blocking(fd, False)
    try:
        while len(sink) < cap and (chunk := os.read(fd, _READ_CHUNK)):
            sink += chunk[: cap - len(sink)]
    except BlockingIOError:
        pass


def _end_session(child: subprocess.Popen) -> None:
    """Kill the child and everything it started, then reap it. Killing before reaping keeps
    the process-group id from being reused in between."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    child.stdout.close()
    if not child.stdin.closed:
        try:
            child.stdin.close()
        except OSError:
            pass


def _verdict(
    run: _ChildRun, returncode: int, token: str, limits: Limits, duration: float
) -> ExecResult:
    output_text = run.output.decode("utf-8", "replace")
    done = functools.partial(ExecResult, output=output_text, duration_s=duration)
    if run.timed_out:
        return done(ok=False, error=f"timed out after {limits.timeout:g} s (wall clock)")
    if run.output_overflow:
        return done(ok=False, error=f"printed more than {limits.max_output_bytes} bytes; stopped")
    ready_token, _, record = run.record.decode("utf-8", "replace").partition("\n")
    if ready_token != token:
        raise SandboxError(
            f"the sandbox child failed before running the snippet (exit status {returncode}): "
            + (output_text[-2000:] or "no output")
        )
    # The outcome repeats the token, so that bytes the snippet itself wrote to the result
    # pipe cannot pass for one.
    outcome_token, status, text = (record.split("\n", 2) + ["", ""])[:3]
    if outcome_token == token and status == "ok":
        return done(ok=True, value=text)
    if outcome_token == token and status == "error":
        return done(ok=False, error=text)
    if returncode < 0:
        return done(ok=False, error=_signal_error(-returncode, limits))
    return done(ok=False, error=f"the child exited with status {returncode} without a result")


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
