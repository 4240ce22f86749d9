"""Run model-written Python snippets in throwaway, locked-down child processes.

FinLFQA scores the code a model writes by whether it runs (DESIGN.md, "Code execution
rate"): a snippet passes when it defines a function that, called with no arguments, returns
a value other than None within the limits. :func:`run_code` runs one snippet that way,
:func:`run_codes` many in parallel, :func:`code_exec_rate` turns results into the rate and
:func:`failure_categories` the failures into shares by kind (:class:`ExecResult`).

Which function is called: among the functions the snippet defines at the top level (``def``
or a ``lambda`` bound to a name), the last one, by line, that can be called with no
arguments (every parameter has a default, or is ``*args``/``**kwargs``); so a ``main()``
followed by its helpers is still the one called. When every function needs arguments, the
last one is called anyway and fails for want of them (``missing_arguments``, the paper's
most common failure). The snippet runs as a ``__main__`` module, so an ``if __name__ ==
"__main__":`` block runs too (before the call). A generator, coroutine or asynchronous
generator as the value (a function with ``yield``, an ``async def``) is a failure: its body
has not run.

What a snippet may import: the standard library, numpy and pandas (and what pandas needs:
python-dateutil, six, pytz, tzdata where installed; :data:`OFFERED_DISTRIBUTIONS`), read-only,
as FinLFQA's model code expects a normal Python environment. Nothing else from
site-packages: the child starts with ``-I -S``, and a finder knows only those packages'
names. ``ctypes`` and ``subprocess``, which pandas imports whatever the platform, are
stand-ins whose every attribute is refused; ``numpy.ctypeslib`` and ``ndarray.ctypes``
fail with them. Numerical libraries run one thread (``OPENBLAS_NUM_THREADS=1`` and the
like: :data:`CHILD_ENVIRONMENT`). Importing numpy and pandas takes about 160 MB of address
space of the default 512 (``bench/bench_sandbox.py`` measures it) and, on an idle core,
about half a second.

Model code is hostile, so every snippet runs in its own fresh child process
(``_sandbox_child.py``) behind these layers, outermost first:

1. Process. ``python -I -S`` (no site-packages, no user site, ``PYTHON*`` variables
   ignored) in a new session, with an environment of its own (:data:`CHILD_ENVIRONMENT`,
   nothing inherited), no inherited descriptors but its pipes, and a fresh temporary
   working directory that is removed afterwards.
2. Kernel namespaces, where they can be had (run as root with ``CAP_SYS_ADMIN``; probed
   once per process, see :func:`isolation`). The child, still root, enters new mount,
   network and IPC namespaces (mount only, if that is all that works), makes every mount
   read-only in its namespace, and mounts a ``noexec`` tmpfs of ``disk_mb`` and
   :data:`MAX_WORKDIR_ENTRIES` inodes, owned by the sandbox user, as its working directory:
   its files are bounded in total and vanish with the namespace, and it has no network but
   a loopback that is down. Where namespaces cannot be had (not root, no ``CAP_SYS_ADMIN``
   as in Docker's default or under ``capsh --drop=cap_sys_admin``, or
   ``LM_EVAL_FIN_SANDBOX_NO_NAMESPACES=1``), the parent measures the working directory,
   with the files the child deleted but holds open, every 50 ms and after the run instead
   (more than ``disk_mb`` or :data:`MAX_WORKDIR_ENTRIES` entries: stopped, a ``resource``
   failure).
3. Landlock, where the kernel offers it (Linux 5.13 and later with ``landlock`` among its
   security modules; no root needed; ``LM_EVAL_FIN_SANDBOX_NO_LANDLOCK=1`` turns it off).
   The child may read only the interpreter, the standard library, the offered packages,
   the folders of the shared libraries the interpreter loaded, the dynamic loader's cache,
   the time zone files, a few devices and its working directory; it may write, create,
   remove or rename only in its working directory (and write ``/dev/null``). From ABI 4 it
   can neither bind nor connect TCP sockets; from ABI 6 it can signal no process and
   reach no abstract Unix socket outside its own Landlock domain. This holds below the
   audit hook: C code, and any way past the hook, meets it too.
4. Seccomp filter (every child; no root needed: ``no_new_privs``; x86_64 and aarch64).
   The kernel refuses (``EPERM``): signals, ``pidfd_open``, ``prlimit``, priority and
   affinity changes aimed at any process but the child itself (``pidfd_send_signal``
   always: its descriptor could name any process); ``ptrace`` and reading or writing other
   processes' memory; ``fork``, ``clone`` (processes and threads) and ``execve``
   (``execveat`` only from a descriptor number the snippet can never hold, by which the
   confinement stage starts the snippet's interpreter); ``memfd_create``, ``memfd_secret``,
   System V shared memory, message queues and semaphores, POSIX message queues (memory
   that ``RLIMIT_AS`` does not count); ``mknod``/``mkfifo`` anywhere; ``socket``;
   ``io_uring``, ``userfaultfd``, ``bpf``, ``perf_event_open``, the key rings; new
   namespaces, ``setns`` and every mount call. Calls of another architecture kill the
   child. A child that cannot install the filter does not start (:class:`SandboxError`).
   Namespaces, Landlock and the filter are set up by a first interpreter that uses
   ``ctypes``; it then replaces itself with the snippet's interpreter, which never loads
   ``ctypes``, and they carry over to it for good.
5. Kernel limits, set with ``setrlimit`` before the snippet exists: address space, CPU
   seconds, size of any file written, open descriptors (:data:`MAX_OPEN_FILES`), no new
   processes or threads (``RLIMIT_NPROC`` 0), no core files.
6. Unprivileged user. Run as root (these machines and CI are), the child switches to uid
   and gid 65534 after the interpreter has started, since root ignores ``RLIMIT_NPROC``
   and file permissions. The interpreter and the packages may live where that user may not
   read (under /root here), so the child opens their folders first and imports through
   those descriptors (``/proc/self/fd/N``) afterwards. Not run as root, there is no other
   user to switch to: snippets run as you, and :func:`isolation` says so in its warning.
7. Audit hook (``sys.addaudithook``; Python code cannot remove it). It refuses: new
   processes and signals (``os.fork``/``exec``/``spawn``/``system``, ``subprocess``,
   ``os.kill``); sockets; ``ctypes``; opening files for writing outside the working
   directory, and for reading outside it, the standard library, the offered packages and
   a few shared files (``/dev/null``, ``/dev/urandom``, zoneinfo), so that neither
   ``/proc/<parent>/environ`` nor ``/proc/self/mem`` opens; ``os.open`` with a relative
   path (a ``dir_fd`` the hook cannot see could point anywhere); creating, removing or
   renaming anything outside the working directory, and links, ``chmod`` and ``chdir``
   anywhere; loading native code (an extension module) from anywhere but the standard
   library and the offered packages; ``fcntl`` and ``syslog`` calls; raising limits; tracing, ``gc`` object walks,
   hand-made code objects, rewriting the code or defaults of the sandbox's own functions;
   importing the modules that give these powers (an ``ImportError``, so that ``try:
   import`` falls back as it would where they are missing). The hook binds all it uses
   when it is installed and never calls the snippet's code, so rebinding names in
   ``builtins``, ``os`` or ``sys.modules`` does not change its decisions. Its refusals
   read ``sandbox: ...`` and count as ``refused``.
8. Parent. A wall-clock deadline (the whole child, start-up included); captured output is
   capped and the child stopped beyond the cap; the child's whole session is killed when it
   ends or times out; nothing the snippet does raises in the parent. A sandbox that cannot
   start (before any snippet code runs) raises :class:`SandboxError` rather than scoring
   every snippet as a failure.

What each setting has (the same in CI as here, given the same kernel):

============================  ====================  ====================  ====================
layer                         root, namespaces      root, no namespaces   not root
============================  ====================  ====================  ====================
snippet's user                65534                 65534                 yours
seccomp filter                yes                   yes                   yes
Landlock (if the kernel has)  yes                   yes                   yes
read-only mounts, tmpfs       yes                   watchdog on the dir   watchdog on the dir
network                       empty namespace       no sockets (seccomp)  no sockets (seccomp)
limits, audit hook            yes                   yes                   yes
============================  ====================  ====================  ====================

What stays open, knowingly:

- CPython documents audit hooks as no security boundary. Code that corrupts the
  interpreter's memory (through some CPython bug; ``ctypes``, ``/proc/self/mem`` and native
  code from the working directory are refused) gets past layer 7, not past layers 1-6.
  ``_imp.create_builtin`` raises no audit event: it rebuilds ``posix`` and ``_signal`` with
  every call, and where the interpreter has ``_socket``, ``_posixsubprocess``, ``fcntl`` or
  ``syslog`` compiled in (Debian's system Python does) it hands them out past the import
  guard. What they can do is refused all the same: by the audit events their calls raise
  (sockets, ``fcntl``, ``syslog``) and by the seccomp filter (``fork_exec``, ``mkfifo``,
  ``mknod``, ``memfd_create``, ``pidfd_open``, ``pidfd_send_signal``, which raise none).
  The test suite's ``*_via_imp`` attacks take whichever route the interpreter offers.
- Without Landlock (older kernels, or kernels built without it), only the audit hook keeps
  snippets from writing outside their folder what their user may write (for you, when not
  root: your files) and from reading what it may read; the seccomp filter still refuses
  FIFOs, device files, memfds, signals and new processes. :func:`isolation` logs this.
- The hook's path checks are lexical: a symbolic link inside the standard library or a
  package leads where it points (Landlock, where present, stops reads outside).
- Memory outside ``RLIMIT_AS``: the working directory where it is a tmpfs (with
  namespaces, up to ``disk_mb``; without, where /tmp is one, what the watchdog allows);
  pipes (at most :data:`MAX_OPEN_FILES` buffers of 64 KiB). ``bench/bench_sandbox.py``
  measures what a snippet holds this way.
- Disk without namespaces: the watchdog (which counts the files the child deleted but holds
  open too) lets a snippet pass ``disk_mb`` by what it writes in 50 ms before it is stopped.
- Not run as root, snippets run as you: what Landlock (or, without it, the hook) lets them
  read is readable to you anyway, and files they make in their folder are yours.
- A snippet written against this module's internals can read its result token from the
  child's stack frames and fake its own success; that changes its score, nothing outside.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
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
from dataclasses import dataclass, replace
from pathlib import Path

from lm_eval_fin._sandbox_child import FAILURE_CATEGORIES

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
_READ_CHUNK = 1 << 16
_DISK_CHECK_INTERVAL_S = 0.05  # how often the fallback watchdog measures the working directory

# unshare(2) flags, and the sets tried in order (the first that works is used)
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
NAMESPACE_CHOICES = (
    (("mount", "network", "ipc"), CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC),
    (("mount",), CLONE_NEWNS),
)
_PROBE_TIMEOUT_S = 20.0
NO_NAMESPACES_VARIABLE = "LM_EVAL_FIN_SANDBOX_NO_NAMESPACES"  # set to 1: no namespaces
NO_LANDLOCK_VARIABLE = "LM_EVAL_FIN_SANDBOX_NO_LANDLOCK"  # set to 1: no Landlock

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
    start-up included. ``category``: why it failed, one of :data:`FAILURE_CATEGORIES`
    (None when ``ok``):

    - ``syntax``: it does not compile (syntax or indentation error, NUL bytes, not text);
    - ``no_function``: it defines no function;
    - ``missing_arguments``: every function it defines needs arguments, so the call fails;
    - ``exception``: its code raised, or its process ended without a result;
    - ``none_result``: the function returned None;
    - ``generator``: it returned a generator or coroutine (its body has not run);
    - ``refused``: the sandbox refused something it tried (a file outside its folder, a
      process, a socket, ``ctypes``, a thread);
    - ``resource``: memory, disk, file size, open files or output past the limits;
    - ``timeout``: wall-clock or CPU time.
    """

    ok: bool
    value: str | None = None
    error: str | None = None
    output: str = ""
    duration_s: float = 0.0
    category: str | None = None


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
    when none could be set up; ``reason``: why not, then. ``landlock_abi``: the Landlock ABI
    version each child restricts itself with, 0 for none; ``landlock_reason``: why none.
    ``snippet_uid``: the user snippets run as (65534 when started as root, else yours);
    ``own_user``: True when that is the evaluator's own user (not started as root). The
    seccomp filter is not listed: every child installs it or does not start.
    """

    namespaces: tuple[str, ...] = ()
    flags: int = 0
    reason: str | None = None
    landlock_abi: int = 0
    landlock_reason: str | None = None
    snippet_uid: int = UNPRIVILEGED_UID
    own_user: bool = False


_isolation: Isolation | None = None
_isolation_lock = threading.Lock()


def isolation() -> Isolation:
    """The kernel isolation snippets run under here; probed (and, when missing, logged as a
    warning) on first use."""
    global _isolation
    with _isolation_lock:
        if _isolation is None:
            _isolation = _probe_isolation()
            gaps = isolation_gaps(_isolation)
            if gaps:
                logger.warning("sandbox: weaker isolation here. %s", " ".join(gaps))
        return _isolation


def isolation_gaps(found: Isolation) -> list[str]:
    """What ``found`` lacks against the full sandbox (root, namespaces, Landlock), one
    plain sentence per gap; empty when nothing is missing."""
    gaps = []
    if found.own_user:
        gaps.append(
            f"Not running as root, so the sandbox cannot switch to an unprivileged user: snippets "
            f"run as your own user (uid {found.snippet_uid}) and may read what you may read "
            "wherever Landlock and the audit hook do not stop them. The seccomp filter still "
            "refuses them signals to any other process (yours included), new processes and "
            "programs, sockets and memfds."
        )
    if not found.namespaces:
        gaps.append(
            f"No kernel namespaces ({found.reason}): the seccomp filter and the audit hook close "
            "the network, and the working directory is measured every "
            f"{_DISK_CHECK_INTERVAL_S * 1000:g} ms rather than bounded by a tmpfs."
        )
    if not found.landlock_abi:
        owner = "you own" if found.own_user else f"uid {found.snippet_uid} may write"
        gaps.append(
            f"No Landlock ({found.landlock_reason}): only the audit hook keeps snippets from "
            f"writing files {owner} outside their folder and from reading them, which native "
            "code (through some CPython bug) would get past."
        )
    return gaps


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


def failure_categories(results: Iterable[ExecResult]) -> dict[str, float]:
    """Share of all snippets that failed in each category (:data:`FAILURE_CATEGORIES`),
    keyed ``code_<category>``, every category present. With :func:`code_exec_rate` the
    shares add up to 1. No snippets: every share 0.0, as the rate. A failure without a
    category (an :class:`ExecResult` made by hand) counts as ``exception``."""
    results = list(results)
    counts = dict.fromkeys(FAILURE_CATEGORIES, 0)
    for result in results:
        if not result.ok:
            category = result.category if result.category in counts else "exception"
            counts[category] += 1
    return {f"code_{name}": count / len(results) if results else 0.0 for name, count in counts.items()}


@functools.cache
def _compiled(script: Path):
    return compile(script.read_text(encoding="utf-8"), str(script), "exec", dont_inherit=True)


def _run(code, limits: Limits) -> ExecResult:
    if isinstance(code, str):  # subclasses too (numpy.str_ from a dataset), as a plain str
        return _run_in_child(str.__str__(code), limits, isolation())
    if isinstance(code, bytes):
        return _run_in_child(bytes(memoryview(code)), limits, isolation())
    return ExecResult(
        ok=False, error=f"not code: expected str or bytes, got {type(code).__name__}", category="syntax"
    )


def _run_in_child(
    code: str | bytes, limits: Limits, kernel: Isolation, script: Path | None = None
) -> ExecResult:
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
        disk_check = None if kernel.namespaces else functools.partial(_over_disk, workdir, limits, child.pid)
        try:
            message = marshal.dumps((_compiled(script or CHILD_SCRIPT), job))
            run = _watch(child, message, result_read, started + limits.timeout, limits, disk_check)
        finally:
            _end_session(child)
        if disk_check is not None and not (run.timed_out or run.output_overflow):
            # the folder only: the child is reaped, and its pid may be another process's now
            run.disk_exceeded = run.disk_exceeded or _over_disk(workdir, limits)
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
        "stub": CHILD_STUB,
    }


def _start_child(workdir: str, result_write: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", CHILD_STUB],
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
            path = os.path.realpath(distribution.locate_file(top))
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


def _landlock_abi() -> tuple[int, str | None]:
    """(Landlock ABI version the kernel offers, 0 if none; why none)."""
    if os.environ.get(NO_LANDLOCK_VARIABLE, "").strip() not in ("", "0"):
        return 0, f"turned off by {NO_LANDLOCK_VARIABLE}"
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    version = libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if version < 1:
        return 0, f"not offered by this kernel: {os.strerror(ctypes.get_errno())}"
    return int(version), None


_LANDLOCK_CREATE_RULESET = 444  # the same on every architecture
# What the probes run: under namespaces, True only where the file system is as they should
# leave it; without, True once the child is set up.
NAMESPACE_PROBE = """\
import os
def probe():
    read_only = lambda path: bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    return read_only("/") and read_only("..") and not read_only(".") or None
"""
PLAIN_PROBE = "def probe():\n    return True\n"


def _probe_isolation() -> Isolation:
    """The strongest isolation under which a child starts and passes its probe: each set of
    :data:`NAMESPACE_CHOICES` in turn (as root), then none; each with Landlock if the kernel
    offers it, then without. Raises :class:`SandboxError` when none starts (the seccomp
    filter cannot be installed, for one)."""
    if sys.platform != "linux":
        raise SandboxError(f"the sandbox needs Linux (seccomp, rlimits, /proc); this is {sys.platform}")
    own_user = os.geteuid() != 0
    uid = os.geteuid() if own_user else UNPRIVILEGED_UID
    abi, landlock_reason = _landlock_abi()
    if os.environ.get(NO_NAMESPACES_VARIABLE, "").strip() not in ("", "0"):
        choices, reasons = [], [f"turned off by {NO_NAMESPACES_VARIABLE}"]
    elif os.geteuid() != 0:
        choices, reasons = [], ["not running as root (namespaces here need CAP_SYS_ADMIN)"]
    else:
        choices, reasons = list(NAMESPACE_CHOICES), []
    landlock_failures = []
    for names, flags in [*choices, ((), 0)]:
        for landlock in (abi, 0) if abi else (0,):
            candidate = Isolation(
                namespaces=names,
                flags=flags,
                reason=None if names else "; ".join(reasons),
                landlock_abi=landlock,
                landlock_reason=landlock_reason if not landlock else None,
                snippet_uid=uid,
                own_user=own_user,
            )
            probe = NAMESPACE_PROBE if names else PLAIN_PROBE
            try:
                result = _run_in_child(probe, Limits(timeout=_PROBE_TIMEOUT_S), candidate, _REAL_CHILD_SCRIPT)
                failure = None if result.ok else f"the probe failed: {result.error}"
            except SandboxError as exc:
                failure = str(exc).strip()[-500:]
            if failure is None:
                if landlock_failures and not landlock:
                    candidate = replace(candidate, landlock_reason="; ".join(landlock_failures))
                return candidate
            namespace_failure = "could not set up the namespaces" in failure  # before Landlock's turn
            if landlock and not namespace_failure:  # try these namespaces again without Landlock
                landlock_failures.append(f"ABI {landlock}: {failure}")
            elif names:  # try the next set of namespaces
                reasons.append(f"{'+'.join(names)}: {failure}")
                break
            else:
                raise SandboxError(f"the sandbox cannot start here: {failure}")
    raise AssertionError("unreachable: the last choice returns or raises")


def _over_disk(workdir: str, limits: Limits, pid: int | None = None) -> bool:
    """Whether the working directory, with the files process ``pid`` holds open after
    deleting them, holds more than ``disk_mb`` or :data:`MAX_WORKDIR_ENTRIES` entries (the
    fallback's check; a tmpfs bounds it otherwise)."""
    total, entries, pending = _deleted_but_open_bytes(pid) if pid else 0, 0, [workdir]
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
                total += _file_bytes(info)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                if total > limits.disk_bytes or entries >= MAX_WORKDIR_ENTRIES:
                    return True
    return total > limits.disk_bytes


def _file_bytes(info: os.stat_result) -> int:
    # the larger of blocks and size: delayed allocation may not show in blocks yet
    size = info.st_size if stat.S_ISREG(info.st_mode) else 0
    return max(info.st_blocks * 512, size)


def _deleted_but_open_bytes(pid: int) -> int:
    """What the regular files process ``pid`` holds open with no name left take: invisible
    to a scan of the folder, on disk (or, where /tmp is a tmpfs, in memory) until it exits."""
    total = 0
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone already
        return 0
    for descriptor in descriptors:
        try:
            info = os.stat(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 0:
            total += _file_bytes(info)
    return total


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
