"""Run model-written Python snippets in throwaway, locked-down child processes.

FinLFQA scores the code a model writes by whether it runs (DESIGN.md, "Code execution
rate"): a snippet passes when it defines a function that, called with no arguments, returns
a value other than None within the limits. :func:`run_code` runs one snippet that way,
:func:`run_codes` many in parallel, :func:`code_exec_rate` turns results into the rate.

Which function is called: among the functions the snippet defines at the top level (``def``
or a ``lambda`` bound to a name), the last one, by line, that can be called with no
arguments (every parameter has a default, or is ``*args``/``**kwargs``); so a ``main()``
followed by its helpers is still the one called. When every function needs arguments, the
last one is called anyway and fails for want of them. The snippet runs as a ``__main__``
module, so an ``if __name__ == "__main__":`` block runs too (before the call). A generator,
coroutine or asynchronous generator as the value (a function with ``yield``, an ``async
def``) is a failure: its body has not run. Only the standard library can be imported: the
child starts with ``-I -S``.

Model code is hostile, so every snippet runs in its own fresh child process
(``_sandbox_child.py``) behind these layers, outermost first:

1. Process. ``python -I -S`` (no site-packages, no user site, ``PYTHON*`` variables
   ignored) in a new session, with an empty environment, no inherited descriptors but its
   pipes, and a fresh temporary working directory that is removed afterwards.
2. Kernel namespaces, where they can be had (run as root with ``CAP_SYS_ADMIN``; probed
   once per process, see :func:`isolation`). The child, still root, enters new mount,
   network and IPC namespaces (mount only, if that is all that works), makes every mount
   read-only in its namespace, and mounts a tmpfs of ``disk_mb`` and
   :data:`MAX_WORKDIR_ENTRIES` inodes, owned by the sandbox user, as its working directory:
   the snippet can write nowhere else, whatever call it finds, its files are bounded in
   total and vanish with the namespace, and it has no network but a loopback that is down.
   The set-up needs ``_ctypes``, which must not be loaded where the snippet runs, so the
   child then ``execve``s a fresh interpreter that carries on inside the namespaces.
   Where namespaces cannot be had (not root, no ``CAP_SYS_ADMIN``, a seccomp filter as in
   Docker's default, or ``LM_EVAL_FIN_SANDBOX_NO_NAMESPACES=1``), a warning saying why is
   logged once and the parent makes up for it in part: it measures the working directory
   every 50 ms and after the run (more than ``disk_mb`` or :data:`MAX_WORKDIR_ENTRIES`
   entries: stopped, a failure), and, run as root, removes after every run what the sandbox
   user created in world-writable folders (:data:`WORLD_WRITABLE_CANDIDATES` and the
   temporary folder), see "What stays open".
3. Kernel limits, set with ``setrlimit`` before the snippet exists: address space, CPU
   seconds, size of any file written, open descriptors (:data:`MAX_OPEN_FILES`), no new
   processes or threads (``RLIMIT_NPROC`` 0), no core files.
4. Unprivileged user. Run as root (these machines and CI are), the child switches to uid
   and gid 65534 after the interpreter has started, since root ignores ``RLIMIT_NPROC``,
   writes anywhere and signals anyone. The interpreter lives where that user may not read
   (under /root here), so the child opens the standard library's folders first and imports
   through those descriptors (``/proc/self/fd/N``) afterwards.
5. Audit hook (``sys.addaudithook``; Python code cannot remove it). It refuses: new
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
   ``os.memfd_create``, ``os.pidfd_open`` and ``signal.pidfd_send_signal`` raise no audit
   event, so they are removed from their modules.
6. Parent. A wall-clock deadline (the whole child, start-up included); captured output is
   capped and the child stopped beyond the cap; the child's whole session is killed when it
   ends or times out (forked descendants would keep the pipes open); nothing the snippet
   does raises in the parent. A sandbox that cannot start (before any snippet code runs)
   raises :class:`SandboxError` rather than scoring every snippet as a failure.

What stays open, knowingly:

- CPython documents audit hooks as no security boundary. Code that corrupts the
  interpreter's memory (through some CPython bug; ``ctypes`` and ``/proc/self/mem`` are
  refused) gets past layer 5, not past layers 1-4. ``_imp.create_builtin`` rebuilds
  ``posix`` and ``_signal`` with the removed calls. With namespaces, ``mkfifo`` and
  ``mknod`` then fail (read-only file system). Without them, as uid 65534 they create
  FIFOs or empty files in world-writable folders; the fallback removes those in the folders
  it knows of after the run (they exist until then, the snippet may still score as a
  success, and another folder writable by uid 65534 is not cleaned). The clean-up takes
  uid 65534 to be the sandbox's alone: files it comes to own in those folders while
  snippets run are removed, whoever made them. In both modes the rebuilt ``_signal`` can
  signal other processes of uid 65534: snippets running at the same time (spoiling their
  scores) or other "nobody" processes on the machine.
- Disk and memory: with namespaces, the tmpfs bounds the working directory (in memory,
  freed when the child exits). Without, the watchdog lets a snippet pass ``disk_mb`` by
  what it writes in 50 ms before it is stopped, and cannot see files deleted while still
  open. Either way, at most :data:`MAX_OPEN_FILES` such files (or memfds from a rebuilt
  ``posix``, which live in memory outside ``RLIMIT_AS``) of up to ``file_size_mb`` each are
  held until the child exits.
- Not run as root, layers 2 and 4 are missing and the fallback removes nothing (it cannot
  tell the snippet's files from yours): the child runs as you, and layer 5 alone keeps it
  from your files and processes (the ``_imp`` route above reaches them). Run untrusted code
  as root (the child then drops to uid 65534) or inside a container.
- Without a network namespace, the network is closed by layer 5 only.
- A snippet written against this module's internals can read its result token from the
  child's stack frames and fake its own success; that changes its score, nothing outside.
"""

from __future__ import annotations

import functools
import logging
import marshal
import math
import os
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CHILD_SCRIPT = Path(__file__).with_name("_sandbox_child.py")
_REAL_CHILD_SCRIPT = CHILD_SCRIPT  # what the probe runs, whatever a test patches
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
child["main"](job, child_code)
"""
UNPRIVILEGED_UID = 65534  # "nobody"; also used as the gid
MAX_TEXT_CHARS = 4096  # longest value repr or error message kept
MAX_WORKDIR_ENTRIES = 4096  # files and folders the working directory may hold
MAX_OPEN_FILES = 64  # descriptors the child may hold at once
WORKDIR_PREFIX = "lm-eval-fin-sandbox-"
_READ_CHUNK = 1 << 16
_DISK_CHECK_INTERVAL_S = 0.05  # how often the fallback watchdog measures the working directory

# unshare(2) flags, and the sets tried in order (the first that works is used)
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
NAMESPACE_CHOICES = (
    (("mount", "network", "ipc"), CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC),
    (("mount",), CLONE_NEWNS),
)
# Folders the unprivileged user can usually write to, outside any namespace: where the
# fallback looks for what a snippet left behind.
WORLD_WRITABLE_CANDIDATES = (
    "/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/lock",
)  # fmt: skip
_PROBE_TIMEOUT_S = 20.0
NO_NAMESPACES_VARIABLE = "LM_EVAL_FIN_SANDBOX_NO_NAMESPACES"  # set to 1: use the fallback

logger = logging.getLogger(__name__)


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
    only place it may write). ``disk_mb``: all it may keep in its working directory at once
    (besides at most :data:`MAX_WORKDIR_ENTRIES` files and folders). ``max_output_bytes``:
    printing more stops the snippet, a failure.
    """

    timeout: float = 5.0
    memory_mb: int = 512
    cpu_seconds: float | None = None
    file_size_mb: int = 16
    disk_mb: int = 64
    max_output_bytes: int = 64 * 1024

    def __post_init__(self):
        for name in ("timeout", "memory_mb", "file_size_mb", "disk_mb", "max_output_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.cpu_seconds is not None and not self.cpu_seconds > 0:
            raise ValueError(f"cpu_seconds must be positive, got {self.cpu_seconds!r}")

    @property
    def cpu_limit(self) -> int:
        return max(1, math.ceil(self.cpu_seconds if self.cpu_seconds is not None else self.timeout))

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_mb * (1 << 20))


@dataclass(frozen=True)
class Isolation:
    """What kernel isolation the sandbox found here (probed once per process).

    ``namespaces``: those each child enters (``("mount", "network", "ipc")`` at best), empty
    when none could be set up; ``reason``: why not, then.
    """

    namespaces: tuple[str, ...] = ()
    flags: int = 0
    reason: str | None = None


_isolation: Isolation | None = None
_isolation_lock = threading.Lock()


def isolation() -> Isolation:
    """The kernel isolation snippets run under here; probed (and, when missing, logged as a
    warning) on first use."""
    global _isolation
    with _isolation_lock:
        if _isolation is None:
            _isolation = _probe_isolation()
            if not _isolation.namespaces:
                logger.warning(
                    "sandbox: no kernel namespaces for the snippets (%s); falling back to "
                    "limits, the unprivileged user and the audit hook, with a disk watchdog "
                    "and removal of the sandbox user's files from world-writable folders",
                    _isolation.reason,
                )
        return _isolation


def run_code(code: str | bytes, timeout: float = 5.0, **limits) -> ExecResult:
    """Run one snippet in a fresh sandboxed child and call the function it defines.

    ``limits``: the other fields of :class:`Limits`. Whatever the snippet does comes back
    as an :class:`ExecResult` (so does code that is not a str or bytes). Raises only
    ``TypeError`` or ``ValueError`` for unknown or invalid limits, and :class:`SandboxError`
    when the sandbox itself cannot start (no snippet code has run then).
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
        return _run_in_child(str.__str__(code), limits, isolation())
    if isinstance(code, bytes):
        return _run_in_child(bytes(memoryview(code)), limits, isolation())
    return ExecResult(ok=False, error=f"not code: expected str or bytes, got {type(code).__name__}")


def _run_in_child(
    code: str | bytes, limits: Limits, kernel: Isolation, script: Path | None = None
) -> ExecResult:
    started = time.monotonic()
    drop_to_uid = UNPRIVILEGED_UID if os.geteuid() == 0 else None
    strays = _stray_watch() if drop_to_uid is not None and not kernel.namespaces else None
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
        job = _job(workdir, drop_to_uid, result_write, token, limits, kernel.flags)
        job["code"] = code
        child = _start_child(workdir, result_write)
        os.close(result_write)
        result_write = None
        # Without a tmpfs of bounded size (namespaces), the parent measures the directory.
        disk_check = None if kernel.namespaces else functools.partial(_over_disk, workdir, limits)
        try:
            message = marshal.dumps((_compiled(script or CHILD_SCRIPT), job))
            run = _watch(child, message, result_read, started + limits.timeout, limits, disk_check)
        finally:
            _end_session(child)
        if disk_check is not None and not (run.timed_out or run.output_overflow):
            run.disk_exceeded = run.disk_exceeded or disk_check()
        return _verdict(run, child.returncode, token, limits, time.monotonic() - started)
    except OSError as exc:  # the parent's own set-up (pipes, processes), not the snippet
        raise SandboxError(f"cannot start the sandbox child: {exc}") from exc
    finally:
        for fd in (result_read, result_write):
            if fd is not None:
                os.close(fd)
        _remove_tree(workdir)
        if strays is not None:
            strays.remove_new()


def _job(workdir, drop_to_uid, result_fd, token, limits: Limits, namespaces: int) -> dict:
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
        "namespaces": namespaces,
        "stub": CHILD_STUB,
    }


def _start_child(workdir: str, result_write: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", CHILD_STUB],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env={},
        pass_fds=(result_write,),
        start_new_session=True,
    )


# What the probe runs: True only where the file system is as the namespaces should leave it.
PROBE_SNIPPET = """\
import os
def probe():
    read_only = lambda path: bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    return read_only("/") and read_only("..") and not read_only(".") or None
"""


def _probe_isolation() -> Isolation:
    """Run :data:`PROBE_SNIPPET` under each set of :data:`NAMESPACE_CHOICES` in turn, every
    layer on; the first set under which it passes is used."""
    if os.environ.get(NO_NAMESPACES_VARIABLE, "").strip() not in ("", "0"):
        return Isolation(reason=f"turned off by {NO_NAMESPACES_VARIABLE}")
    if sys.platform != "linux":
        return Isolation(reason=f"namespaces are Linux-only, this is {sys.platform}")
    if os.geteuid() != 0:
        return Isolation(reason="not running as root (namespaces here need CAP_SYS_ADMIN)")
    reasons = []
    for names, flags in NAMESPACE_CHOICES:
        candidate = Isolation(namespaces=names, flags=flags)
        try:
            result = _run_in_child(
                PROBE_SNIPPET, Limits(timeout=_PROBE_TIMEOUT_S), candidate, _REAL_CHILD_SCRIPT
            )
        except SandboxError as exc:
            reasons.append(f"{'+'.join(names)}: {str(exc).strip()[-500:]}")
            continue
        if result.ok:
            return candidate
        reasons.append(f"{'+'.join(names)}: the probe failed: {result.error}")
    return Isolation(reason="; ".join(reasons))


def _over_disk(workdir: str, limits: Limits) -> bool:
    """Whether the working directory holds more than ``disk_mb`` or
    :data:`MAX_WORKDIR_ENTRIES` entries (the fallback's check; a tmpfs bounds it otherwise)."""
    total, entries, pending = 0, 0, [workdir]
    while pending:
        try:
            scanner = os.scandir(pending.pop())
        except OSError:
            continue
        with scanner:
            for entry in scanner:
                entries += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                # the larger of blocks and size: delayed allocation may not show in blocks yet
                size = info.st_size if stat.S_ISREG(info.st_mode) else 0
                total += max(info.st_blocks * 512, size)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                if total > limits.disk_bytes or entries >= MAX_WORKDIR_ENTRIES:
                    return True
    return False


@dataclass
class _ChildRun:
    """What the parent saw of one child."""

    output: bytearray
    record: bytearray
    timed_out: bool = False
    output_overflow: bool = False
    disk_exceeded: bool = False


def _watch(
    child: subprocess.Popen,
    job: bytes,
    result_read: int,
    deadline: float,
    limits: Limits,
    disk_check=None,
) -> _ChildRun:
    """Hand the job over (the child reads it first thing), then collect output and the
    result record until the child exits, the deadline passes, the output cap is hit or
    ``disk_check`` (called every :data:`_DISK_CHECK_INTERVAL_S`) says the snippet wrote too
    much. Reads are bounded in size and never wait past the deadline."""
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
            next_disk_check = time.monotonic() + _DISK_CHECK_INTERVAL_S
            while not exited:
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    run.timed_out = True
                    break
                if disk_check is not None and now >= next_disk_check:
                    if disk_check():
                        run.disk_exceeded = True
                        break
                    next_disk_check = time.monotonic() + _DISK_CHECK_INTERVAL_S
                wait = remaining if exit_fd is not None else min(remaining, 0.01)
                if disk_check is not None:
                    wait = max(0.0, min(wait, next_disk_check - now))
                events = selector.select(wait)
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
    if run.disk_exceeded:
        return done(
            ok=False,
            error=f"wrote more than {limits.disk_mb:g} MB or {MAX_WORKDIR_ENTRIES} files and "
            "folders to its working directory; stopped",
        )
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


class _StrayWatch:
    """The fallback's clean-up, without namespaces and run as root: removes what the sandbox
    user created in world-writable folders (FIFOs and empty files; writing there is refused
    by the audit hook, but a rebuilt ``posix`` module has ``mkfifo`` and ``mknod``). The user
    is dedicated to the sandbox, so what it owns there is a snippet's, except what it owned
    before the first snippet ran (left alone) and folders: the working directories of
    snippets still running (a snippet cannot create folders outside its own)."""

    def __init__(self):
        folders = {os.path.realpath(tempfile.gettempdir())}
        folders.update(os.path.realpath(path) for path in WORLD_WRITABLE_CANDIDATES)
        self.folders = sorted(path for path in folders if _writable_by_sandbox_user(path))
        self.before = {entry for folder in self.folders for entry in self._owned(folder)}
        self.lock = threading.Lock()

    @staticmethod
    def _owned(folder: str):
        try:
            scanner = os.scandir(folder)
        except OSError:
            return
        with scanner:
            for entry in scanner:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_uid == UNPRIVILEGED_UID:
                    yield folder, entry.name, info.st_ino, info.st_mode

    def remove_new(self) -> None:
        with self.lock:
            for folder in self.folders:
                for entry in list(self._owned(folder)):
                    _, name, _, mode = entry
                    if entry in self.before or stat.S_ISDIR(mode):
                        continue  # folders: the working directories (snippets make none)
                    try:
                        os.unlink(os.path.join(folder, name))
                    except OSError:
                        pass


def _writable_by_sandbox_user(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        return False
    return bool(
        info.st_mode & stat.S_IWOTH
        or (info.st_uid == UNPRIVILEGED_UID and info.st_mode & stat.S_IWUSR)
        or (info.st_gid == UNPRIVILEGED_UID and info.st_mode & stat.S_IWGRP)
    )


_stray_watch_instance: _StrayWatch | None = None
_stray_watch_lock = threading.Lock()


def _stray_watch() -> _StrayWatch:
    global _stray_watch_instance
    with _stray_watch_lock:
        if _stray_watch_instance is None:
            _stray_watch_instance = _StrayWatch()
        return _stray_watch_instance
