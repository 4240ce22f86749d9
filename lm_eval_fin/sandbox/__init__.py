"""Run model-written Python snippets in throwaway, locked-down child processes.

FinLFQA scores the code a model writes by whether it runs (README, "Metric
definitions"): a snippet passes when it defines a function that, called with no arguments, returns
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
(:mod:`lm_eval_fin.sandbox.child`) behind these layers, outermost first:

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
- A snippet written against the sandbox's internals can read its result token from the
  child's stack frames and fake its own success; that changes its score, nothing outside.

Where each part lives: this module runs snippets (:func:`run_code`, :func:`run_codes`);
:mod:`.settings` holds :class:`Limits` and :class:`Isolation`; :mod:`.probe` finds what
isolation this machine gives (:func:`isolation`); :mod:`.runner` starts one child and reads
its verdict, and :mod:`.watchdog` watches it run; :mod:`.results` holds :class:`ExecResult`
and the rate and failure shares. The child's code is the :mod:`.child` package (layers 2-7:
:mod:`.child.confine` with :mod:`.child.seccomp`, then :mod:`.child.snippet` with
:mod:`.child.audit`), which runs standalone in the child's interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from lm_eval_fin.plumbing.cpus import compute_threads

from .child.snippet import FAILURE_CATEGORIES
from .probe import (
    CLONE_NEWNS,
    NO_LANDLOCK_VARIABLE,
    NO_NAMESPACES_VARIABLE,
    isolation,
    isolation_gaps,
)
from .results import ExecResult, SandboxError, code_exec_rate, failure_categories
from .runner import (
    CHILD_ENVIRONMENT,
    MAX_OPEN_FILES,
    MAX_TEXT_CHARS,
    MAX_WORKDIR_ENTRIES,
    OFFERED_DISTRIBUTIONS,
    offered_packages,
    run_in_child,
)
from .settings import UNPRIVILEGED_UID, Isolation, Limits

__all__ = [
    "CHILD_ENVIRONMENT", "CLONE_NEWNS", "FAILURE_CATEGORIES", "MAX_OPEN_FILES", "MAX_TEXT_CHARS",
    "MAX_WORKDIR_ENTRIES", "NO_LANDLOCK_VARIABLE", "NO_NAMESPACES_VARIABLE", "OFFERED_DISTRIBUTIONS",
    "UNPRIVILEGED_UID", "ExecResult", "Isolation", "Limits", "SandboxError", "code_exec_rate",
    "failure_categories", "isolation", "isolation_gaps", "offered_packages", "run_code", "run_codes",
]  # fmt: skip


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
    """:func:`run_code` for each snippet, ``workers`` at a time (default: the CPUs this process
    may use that the machine's load leaves free, :func:`lm_eval_fin.plumbing.cpus.compute_threads`: the
    timeout is wall-clock time, which children queued behind one another for a busy CPU would
    spend waiting).

    Results come in the order of ``codes``; each snippet still gets its own fresh child.
    """
    each = Limits(timeout=timeout, **limits)
    codes = list(codes)
    workers = max(1, min(workers or compute_threads(), len(codes) or 1))
    if workers == 1:
        return [_run(code, each) for code in codes]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda code: _run(code, each), codes))


def _run(code, limits: Limits) -> ExecResult:
    if isinstance(code, str):  # subclasses too (numpy.str_ from a dataset), as a plain str
        return run_in_child(str.__str__(code), limits, isolation())
    if isinstance(code, bytes):
        return run_in_child(bytes(memoryview(code)), limits, isolation())
    return ExecResult(
        ok=False, error=f"not code: expected str or bytes, got {type(code).__name__}", category="syntax"
    )

