"""Child side of :mod:`lm_eval_fin.sandbox`: runs ONE model-written snippet, then exits.

The parent compiles this file once and starts, per snippet, ``python -I -S -c <stub>`` in a
fresh temporary directory with an empty environment; the stub reads this code and the job
(a dict the parent built) from stdin and calls :func:`main`. On the result descriptor the
job names, the child writes the job's token once the sandbox is set up, and at the end the
token again, ``ok`` or ``error``, and the value's repr or the error, one per line. Standard
library only: the package itself is not importable in the child (``-I -S``).

When the job asks for kernel namespaces, the child first enters them (still root): new
mount, network and IPC namespaces, every mount read-only, a size-bounded tmpfs as the working
directory. That takes ``_ctypes``, which must never be loaded where the snippet runs, so the
child then replaces itself (``execve``) with a fresh interpreter, which gets the same job
through a memfd as its stdin and goes on as below.

The order below is the point: the limits go in first so that they hold whatever runs later,
then the privileges go, then the audit hook, and only then is the snippet compiled.
:mod:`lm_eval_fin.sandbox` describes the layers and what they leave open.
"""

import marshal
import os
import resource
import sys
import types

SNIPPET_FILENAME = "<snippet>"

# Modules whose import the audit hook refuses (by top-level name): they hand out powers the
# sandbox withholds (processes, sockets, raw memory, terminals, C-level file access, test
# hooks into the interpreter's internals).
DENIED_MODULES = frozenset(
    {
        "_ctypes", "ctypes", "_ctypes_test",
        "_socket", "socket", "_ssl", "ssl",
        "_posixsubprocess", "subprocess", "_multiprocessing", "multiprocessing", "_posixshmem",
        "pty", "fcntl", "termios", "readline", "_curses", "_curses_panel", "_tkinter",
        "syslog", "ossaudiodev", "_sqlite3", "sqlite3", "_dbm", "_gdbm",
        "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase", "_testclinic",
        "_testimportmultiple", "_xxsubinterpreters", "_xxtestfuzz",
    }
)  # fmt: skip

# Audit events refused whatever their arguments.
DENIED_EVENTS = frozenset(
    {
        # new processes and signals to other processes
        "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
        "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
        # file-system changes that are never needed (links would fool the path checks; the
        # working directory must stay put for relative paths to mean what the hook thinks)
        "os.chmod", "os.chown", "os.chflags", "os.lchflags", "os.link", "os.symlink",
        "os.setxattr", "os.removexattr", "os.chdir", "shutil.rmtree",
        # undoing the limits, or reaching into the interpreter to undo the hook
        "resource.setrlimit", "resource.prlimit", "sys.settrace", "sys.setprofile",
        "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "code.__new__", "setopencodehook",
    }
)  # fmt: skip
DENIED_EVENT_PREFIXES = ("socket.", "ctypes.")

# File-system changes allowed inside the working directory only: (event, indices of its path
# arguments, indices of its dir_fd arguments, which must be unset since a descriptor could
# point anywhere). os.truncate may also name a descriptor, opened for writing under the hook.
# A tuple, not a dict: the hook's bindings must be immutable.
CHECKED_CHANGES = (
    ("os.mkdir", (0,), (2,)),
    ("os.remove", (0,), (1,)),
    ("os.rmdir", (0,), (1,)),
    ("os.rename", (0, 1), (2, 3)),
    ("os.utime", (0,), (3,)),
    ("os.truncate", (0,), ()),
)

# Device files every program may use; /usr/share/zoneinfo serves the zoneinfo module.
SHARED_READ_PATHS = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/usr/share/zoneinfo")
SHARED_WRITE_PATHS = ("/dev/null",)

# Calls that create files or reach other processes without an audit event.
UNAUDITED_OS_CALLS = ("mkfifo", "mknod", "memfd_create", "pidfd_open")
UNAUDITED_SIGNAL_CALLS = ("pidfd_send_signal",)

# Return values that mean the function's body has not run (or not to its end): calling a
# generator or coroutine function only creates the object.
UNRUN_VALUE_TYPES = (
    (types.GeneratorType, "generator"),
    (types.CoroutineType, "coroutine"),
    (types.AsyncGeneratorType, "asynchronous generator"),
)
_KEPT_ALIVE = []

# Linux constants for the namespace set-up (<sched.h>, <sys/mount.h>).
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
# Per-mount flags a read-only bind remount must restate (or it clears them).
MOUNT_OPTION_FLAGS = (
    (b"nosuid", MS_NOSUID),
    (b"nodev", MS_NODEV),
    (b"noexec", MS_NOEXEC),
    (b"noatime", MS_NOATIME),
    (b"nodiratime", MS_NODIRATIME),
    (b"relatime", MS_RELATIME),
    (b"strictatime", MS_STRICTATIME),
)


def main(job: dict, child_code=None) -> None:
    if job.get("namespaces") and not job.get("in_namespaces"):
        _enter_namespaces(job, child_code)  # does not return
    result_fd, token, max_text_chars = job["result_fd"], job["token"], job["max_text_chars"]
    # stdin held the job (a memfd, once in the namespaces, that could be read again)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _set_limits(job)
    import_roots = [entry for entry in sys.path if os.path.isdir(entry)]
    if job["drop_to_uid"] is not None:
        import_roots = _drop_privileges(job["drop_to_uid"], import_roots)
    _remove_unaudited_calls()
    workdir = job["workdir"]
    sys.addaudithook(
        _make_audit_hook(
            workdir,
            read_roots=(workdir, *import_roots, *SHARED_READ_PATHS),
            write_roots=(workdir, *SHARED_WRITE_PATHS),
        )
    )
    # The token line says the sandbox is up: without it the parent knows that the setup
    # failed (and raises), since no snippet code has run before this point.
    _write_all(result_fd, f"{token}\n".encode())
    ok, text = _run_snippet(job.pop("code"))
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # the snippet may have replaced or closed the streams
            pass
    status = "ok" if ok else "error"
    outcome = f"{token}\n{status}\n{text[:max_text_chars]}"
    _write_all(result_fd, outcome.encode("utf-8", "backslashreplace"))
    # Skip interpreter shutdown: no atexit handlers or finalisers of snippet objects run.
    os._exit(0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _set_limits(job: dict) -> None:
    cpu = job["cpu_seconds"]
    limits = {
        resource.RLIMIT_AS: (job["memory_bytes"],) * 2,
        # SIGXCPU at the soft limit; the kernel's SIGKILL one second later if it is ignored
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_FSIZE: (job["file_size_bytes"],) * 2,
        # no new processes or threads; the kernel ignores this for uid 0, hence the drop
        resource.RLIMIT_NPROC: (0, 0),
        resource.RLIMIT_CORE: (0, 0),
        # also bounds what it can hide from the disk checks in files it deletes but keeps
        # open (or in memfds): this many files of at most the file-size limit each
        resource.RLIMIT_NOFILE: (job["max_open_files"],) * 2,
    }
    for which, limit in limits.items():
        resource.setrlimit(which, limit)


def _enter_namespaces(job: dict, child_code) -> None:
    """Stage one, as root: enter the namespaces, then ``execve`` a fresh interpreter that
    runs the job inside them. Never returns."""
    try:
        _isolate(job["namespaces"], job["workdir"], job["disk_bytes"], job["max_entries"],
                 job["drop_to_uid"])  # fmt: skip
    except OSError as exc:
        # no token written: the parent raises SandboxError with this message
        where = exc.filename or f"errno {exc.errno}"
        raise SystemExit(f"sandbox: could not set up the namespaces: {exc.strerror} ({where})")
    job["in_namespaces"] = True
    message = marshal.dumps((child_code, job))
    job_fd = os.memfd_create("sandbox-job", 0)
    _write_all(job_fd, message)
    os.lseek(job_fd, 0, os.SEEK_SET)
    os.dup2(job_fd, 0)  # inheritable
    os.close(job_fd)
    os.execve(sys.executable, [sys.executable, "-I", "-S", "-c", job["stub"]], {})


def _isolate(flags: int, workdir: str, disk_bytes: int, max_entries: int, uid) -> None:
    """New namespaces (``flags`` for unshare(2)); every mount read-only in them; a tmpfs of
    ``disk_bytes`` and ``max_entries`` inodes, owned by ``uid``, as the working directory."""
    import _ctypes  # only in this stage: the snippet's interpreter never loads it

    libc = _ctypes.dlopen(None)

    class Function(_ctypes.CFuncPtr):  # int f(...), errno kept
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO

    def call(name, *args, _path=None):
        if Function(_ctypes.dlsym(libc, name))(*args) != 0:
            errno = _ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), f"{name} {_path or ''}".strip())

    call("unshare", flags)
    # keep every mount change below inside the new namespace
    call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None, _path="/")
    for mount_point, options in _mount_points():
        remount = MS_BIND | MS_REMOUNT | MS_RDONLY
        for option, flag in MOUNT_OPTION_FLAGS:
            if option in options:
                remount |= flag
        try:
            call("mount", None, mount_point, None, remount, None, _path=os.fsdecode(mount_point))
        except FileNotFoundError:  # a mount point deleted since; nothing to reach there
            pass
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    tmpfs_options = f"size={disk_bytes},nr_inodes={max_entries},mode=0700{owner}"
    call("mount", b"tmpfs", os.fsencode(workdir), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
         tmpfs_options.encode(), _path=workdir)  # fmt: skip
    os.chdir(workdir)  # the old directory is underneath the tmpfs now


def _mount_points():
    """(mount point, options) of every mount this process sees, from /proc/self/mountinfo."""
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            fields = line.split(b" ")
            if len(fields) > 5:
                yield _unescape_mount_path(fields[4]), fields[5].split(b",")


def _unescape_mount_path(path: bytes) -> bytes:
    if b"\\" not in path:
        return path
    parts = path.split(b"\\")
    out = [parts[0]]
    for part in parts[1:]:
        code = part[:3]
        if len(code) == 3 and all(48 <= byte <= 55 for byte in code):
            out.append(bytes([int(code, 8)]) + part[3:])
        else:
            out.append(b"\\" + part)
    return b"".join(out)


def _drop_privileges(uid: int, import_roots: list) -> list:
    """Become ``uid`` for good; return the import roots as paths that still work afterwards.

    The interpreter and its standard library live where the unprivileged user may not read
    (under /root here), so the library folders are opened first and imports go through the
    open descriptors (``/proc/self/fd/N``) from then on.
    """
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY) for root in import_roots]
    sys.path[:] = [f"/proc/self/fd/{fd}" for fd in fds]
    sys.path_importer_cache.clear()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        raise SystemExit("sandbox: could not drop privileges")
    return list(sys.path)


def _remove_unaudited_calls() -> None:
    """Take away calls that create files or signal processes without an audit event."""
    import _signal
    import posix

    removals = (
        (posix, UNAUDITED_OS_CALLS),
        (os, UNAUDITED_OS_CALLS),
        (_signal, UNAUDITED_SIGNAL_CALLS),
    )
    for module, names in removals:
        for name in names:
            module.__dict__.pop(name, None)
            if name in getattr(module, "__all__", ()):  # keep `from os import *` working
                module.__all__.remove(name)


def _make_audit_hook(workdir: str, read_roots: tuple, write_roots: tuple):
    """The audit hook that refuses what the sandbox forbids.

    The hook runs inside the snippet's process, so it is written to give the snippet no
    handle on its decisions:

    - Everything the hook and its helpers use is bound here as a positional default
      argument, immutable (str, tuples, frozensets, builtin types and functions): the snippet
      may rebind names in ``builtins``, ``os`` or ``sys.modules``, or read these bindings
      from a traceback's frames, and the hook still decides the same. Replacing a function's
      defaults or code is itself refused (the ``object.__setattr__`` event).
    - It never calls code the snippet wrote: it inspects only exact ``str``, ``bytes`` and
      ``int`` values (events carry paths already converted by ``os.fspath``) and refuses
      anything else, without printing it.
    """
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    function_type = type(_make_audit_hook)

    def normalise(path, _type=type, _str=str, _bytes=bytes, _decode=bytes.decode, _cwd=workdir):
        # Lexical, like os.path.normpath: the snippet cannot create symbolic links, so no
        # link inside the working directory can lead outside it.
        if _type(path) is _bytes:
            path = _decode(path, "utf-8", "surrogateescape")
        elif _type(path) is not _str:
            return None
        if not path.startswith("/"):
            path = _cwd + "/" + path
        parts = []
        for part in path.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + "/".join(parts)

    def allowed(path, roots, _norm=normalise):
        target = _norm(path)
        if target is None:
            return False
        for root in roots:
            if target == root or target.startswith(root + "/"):
                return True
        return False

    def shown(value, _type=type, _str=str, _bytes=bytes, _repr=repr):
        # repr() only of builtin values; a snippet's object could run code in its __repr__
        return _repr(value) if _type(value) is _str or _type(value) is _bytes else "a non-text path"

    def hook(
        event,
        args,
        _type=type,
        _str=str,
        _int=int,
        _bytes=bytes,
        _function=function_type,
        _allowed=allowed,
        _shown=shown,
        _deny=PermissionError,
        _events=DENIED_EVENTS,
        _prefixes=DENIED_EVENT_PREFIXES,
        _modules=DENIED_MODULES,
        _changes=CHECKED_CHANGES,
        _write_flags=write_flags,
        _reads=read_roots,
        _writes=write_roots,
        _workdir=(workdir,),
        _write_scope="(only inside the working directory)",
        _read_scope="(only the working directory and the standard library)",
    ):
        if _type(event) is not _str:
            return
        if event in _events or event.startswith(_prefixes):
            raise _deny(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = args
            if _type(path) is _int:  # a descriptor the snippet already holds
                return
            writing = _type(flags) is not _int or flags & _write_flags
            absolute = (_type(path) is _str and path.startswith("/")) or (
                _type(path) is _bytes and path.startswith(b"/")
            )
            if mode is None and not absolute:
                # os.open may resolve it against a dir_fd the event does not show
                raise _deny(f"sandbox: os.open needs an absolute path, not {_shown(path)}")
            if writing and not _allowed(path, _writes):
                raise _deny(f"sandbox: writing {_shown(path)} is not allowed " + _write_scope)
            if not writing and not _allowed(path, _reads):
                raise _deny(f"sandbox: reading {_shown(path)} is not allowed " + _read_scope)
        elif event == "object.__setattr__" or event == "object.__delattr__":
            if _type(args[0]) is _function:  # the events cover __code__ and __defaults__
                raise _deny("sandbox: changing a function's code or defaults is not allowed")
        elif event == "os.listdir" or event == "os.scandir":
            path = args[0]
            if path is not None and _type(path) is not _int and not _allowed(path, _reads):
                raise _deny(f"sandbox: listing {_shown(path)} is not allowed")
        elif event == "import":
            name = args[0]
            if _type(name) is _str and name.partition(".")[0] in _modules:
                raise _deny(f"sandbox: importing {name} is not allowed")
        else:
            for checked_event, path_indices, dir_fd_indices in _changes:
                if event != checked_event:
                    continue
                for index in dir_fd_indices:
                    if _type(args[index]) is not _int or args[index] != -1:
                        raise _deny(f"sandbox: {event} with dir_fd is not allowed")
                for index in path_indices:
                    path = args[index]
                    if event == "os.truncate" and _type(path) is _int:
                        continue
                    if not _allowed(path, _workdir):
                        raise _deny(
                            f"sandbox: {event} on {_shown(path)} is not allowed " + _write_scope
                        )

    return hook


def _run_snippet(code) -> tuple:
    """(True, repr of the value) or (False, what went wrong)."""
    try:
        try:
            compiled = compile(code, SNIPPET_FILENAME, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in the source
            return False, _describe(exc)
        module = type(sys)("__main__")
        sys.modules["__main__"] = module
        try:
            exec(compiled, module.__dict__)
        except BaseException as exc:
            return False, _describe(exc)
        function = _entry_point(module.__dict__)
        if function is None:
            return False, "no function defined: the snippet must define a function to call"
        try:
            value = function()
        except BaseException as exc:
            return False, _describe(exc)
        if value is None:
            return False, f"{function.__name__}() returned None"
        for unrun_type, kind in UNRUN_VALUE_TYPES:
            if type(value) is unrun_type:
                # kept until the process ends: freeing it would run the snippet's cleanup
                # (or print a "never awaited" warning)
                _KEPT_ALIVE.append(value)
                return False, (
                    f"{function.__name__}() returned a {kind}, not a value: its body does not "
                    "run until it is iterated or awaited"
                )
        try:
            return True, repr(value)
        except BaseException as exc:
            return False, "repr() of the returned value failed: " + _describe(exc)
    except BaseException:  # e.g. MemoryError while describing another error
        return False, "the snippet failed, and describing the failure failed too"


def _entry_point(namespace: dict):
    """The function to call, among those the snippet defined at the top level (``def`` or a
    ``lambda`` bound to a name): the last one, by line, that takes no required arguments;
    when every one needs some, the last one (the call then fails for want of arguments).
    None when the snippet defined no function."""
    function_type = type(_entry_point)
    defined = [
        value
        for value in list(namespace.values())
        if type(value) is function_type and value.__code__.co_filename == SNIPPET_FILENAME
    ]
    callable_bare = [function for function in defined if _needs_no_arguments(function)]
    return max(
        callable_bare or defined,
        key=lambda function: function.__code__.co_firstlineno,
        default=None,
    )


def _needs_no_arguments(function) -> bool:
    """Whether ``function()`` binds: every parameter has a default or is ``*``/``**``."""
    code = function.__code__
    positional_defaults = function.__defaults__ or ()
    keyword_defaults = function.__kwdefaults__ or {}
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    return code.co_argcount <= len(positional_defaults) and all(
        type(name) is str and name in keyword_defaults for name in keyword_only
    )


def _describe(exc: BaseException) -> str:
    """``Type: message (line N)``, N being the snippet's line where it happened."""
    try:
        message = str(exc)
    except BaseException:
        message = "<message unavailable>"
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if isinstance(exc, SyntaxError):
        return text  # its message already names the line
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SNIPPET_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return text if line is None else f"{text} (line {line})"
