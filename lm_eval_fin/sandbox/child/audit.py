"""The audit hook of the snippet's interpreter: what it refuses, and the hook itself.

Installed last before the snippet is compiled (:func:`lm_eval_fin.sandbox.child.snippet.main`);
Python code cannot remove it. Standard library only: this module runs in the sandbox child.
"""

import os

REFUSAL_PREFIX = "sandbox: "  # every refusal of the audit hook and the stand-in modules

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
# Denied modules that pandas imports whatever the platform, to use only on Windows

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
# Whole families of events: a module the import guard refuses may still be had where the
# interpreter has it compiled in (Debian's _socket, fcntl and syslog come from
# _imp.create_builtin, which raises no event), and its calls raise these.
DENIED_EVENT_PREFIXES = ("socket.", "ctypes.", "fcntl.", "syslog.")

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


def make_audit_hook(workdir: str, read_roots: tuple, write_roots: tuple, code_roots: tuple, own_files: tuple):
    """The audit hook that refuses what the sandbox forbids.

    ``code_roots``: where native extension modules may be loaded from (the standard library
    and the offered packages; never the working directory, where the snippet can write).
    ``own_files``: the file names of the sandbox child's modules, whose functions the snippet
    may not rewrite (the hook, and the code that reports the outcome).

    The hook runs inside the snippet's process, so it is written to give the snippet no
    handle on its decisions:

    - Everything the hook and its helpers use is bound here as a positional default
      argument, immutable (str, tuples, frozensets, builtin types and functions): the snippet
      may rebind names in ``builtins``, ``os`` or ``sys.modules``, or read these bindings
      from a traceback's frames, and the hook still decides the same. Replacing the defaults
      or code of the sandbox child's functions is itself refused (the ``object.__setattr__``
      event).
    - It never calls code the snippet wrote: it inspects only exact ``str``, ``bytes`` and
      ``int`` values (events carry paths already converted by ``os.fspath``) and refuses
      anything else, without printing it.
    """
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    function_type = type(make_audit_hook)

    def normalise(path, _type=type, _str=str, _bytes=bytes, _decode=bytes.decode, _cwd=workdir):
        # Lexical, like os.path.normpath: the snippet cannot create symbolic links, so no
        # link inside the working directory can lead outside it.
        if _type(path) is _bytes:
            path = _decode(path, "utf-8", "surrogateescape")
        elif _type(path) is not _str:
            return None
        if not path.startswith("/"):
            path = _cwd + "/" + path
        parts: list[str] = []
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
        _own_files=tuple(own_files),
        _allowed=allowed,
        _shown=shown,
        _deny=PermissionError,
        _deny_import=ImportError,  # so that `try: import x / except ImportError` still works
        _events=DENIED_EVENTS,
        _prefixes=DENIED_EVENT_PREFIXES,
        _modules=DENIED_MODULES,
        _changes=CHECKED_CHANGES,
        _write_flags=write_flags,
        _reads=read_roots,
        _writes=write_roots,
        _code=code_roots,
        _workdir=(workdir,),
        _refusal=REFUSAL_PREFIX,
        _write_scope="(only inside the working directory)",
        _read_scope="(only the working directory, the standard library, numpy and pandas)",
    ):
        if _type(event) is not _str:
            return
        if event in _events or event.startswith(_prefixes):
            raise _deny(_refusal + f"{event} is not allowed")
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
                raise _deny(_refusal + f"os.open needs an absolute path, not {_shown(path)}")
            if writing and not _allowed(path, _writes):
                raise _deny(_refusal + f"writing {_shown(path)} is not allowed " + _write_scope)
            if not writing and not _allowed(path, _reads):
                raise _deny(_refusal + f"reading {_shown(path)} is not allowed " + _read_scope)
        elif event == "object.__setattr__" or event == "object.__delattr__":
            # raised for a function's __code__, __defaults__ and __kwdefaults__: refused for
            # the sandbox child's functions (the hook's bindings), allowed for any other
            # (collections.namedtuple sets __defaults__)
            if _type(args[0]) is _function and args[0].__code__.co_filename in _own_files:
                raise _deny(_refusal + "changing the sandbox's own functions is not allowed")
        elif event == "os.listdir" or event == "os.scandir":
            path = args[0]
            if path is not None and _type(path) is not _int and not _allowed(path, _reads):
                raise _deny(_refusal + f"listing {_shown(path)} is not allowed")
        elif event == "import":
            name, filename = args[0], args[1]
            if _type(name) is not _str:
                raise _deny_import(_refusal + "importing a module by a non-text name is not allowed")
            if name.partition(".")[0] in _modules:
                raise _deny_import(_refusal + f"importing {name} is not allowed")
            # an extension module's file (a source module's is read through "open"):
            # native code only from the standard library and the offered packages
            if filename is not None and not _allowed(filename, _code):
                raise _deny_import(
                    _refusal + f"loading {name} from {_shown(filename)} is not allowed "
                    "(native code only from the standard library, numpy and pandas)"
                )
        else:
            for checked_event, path_indices, dir_fd_indices in _changes:
                if event != checked_event:
                    continue
                for index in dir_fd_indices:
                    if _type(args[index]) is not _int or args[index] != -1:
                        raise _deny(_refusal + f"{event} with dir_fd is not allowed")
                for index in path_indices:
                    path = args[index]
                    if event == "os.truncate" and _type(path) is _int:
                        continue
                    if not _allowed(path, _workdir):
                        raise _deny(
                            _refusal + f"{event} on {_shown(path)} is not allowed " + _write_scope
                        )

    return hook

