"""Stage two of the sandbox child: the snippet's interpreter, and the entry point of both stages.

:func:`main` first confines the process (:mod:`.confine`, which starts this interpreter
afresh). Then, in the fresh interpreter: limits first, so that they hold whatever runs
later, then the privileges go, then numpy and pandas are offered, then the audit hook
(:mod:`.audit`) goes in, and only then is the snippet compiled, run and its function called
(:func:`run_snippet`). Standard library only: this module runs in the sandbox child.
"""

import os
import resource
import sys
import types

from .audit import REFUSAL_PREFIX, SHARED_READ_PATHS, SHARED_WRITE_PATHS, make_audit_hook
from .confine import confine, write_all

SNIPPET_FILENAME = "<snippet>"

# What a failed snippet is counted as (lm_eval_fin.sandbox.failure_categories).
# syntax: does not compile (syntax or indentation error, NUL bytes, not text at all).
# no_function: defines no function. missing_arguments: every function it defines needs
# arguments, so the call without them fails. exception: its code raised (or its process
# ended without a result). none_result: the function returned None. generator: it returned
# a generator or coroutine, whose body has not run. refused: the sandbox refused something
# it tried (audit hook, an unavailable module, threads). resource: memory, disk, file size,
# descriptors or output over the limits. timeout: wall-clock or CPU time.
FAILURE_CATEGORIES = (
    "syntax", "no_function", "missing_arguments", "exception", "none_result", "generator",
    "refused", "resource", "timeout",
)  # fmt: skip
THREAD_REFUSAL = "can't start new thread"  # CPython's message when clone is refused
# errno values of a limit reached: RLIMIT_FSIZE, a full tmpfs, RLIMIT_NOFILE, quotas
RESOURCE_ERRNOS = frozenset({27, 28, 24, 23, 122})  # EFBIG ENOSPC EMFILE ENFILE EDQUOT

# Denied modules that pandas imports whatever the platform, to use only on Windows
# (ctypes.WinError) or in a helper that lists locales (subprocess): in the snippet they are
# stand-ins whose every attribute is refused, so that pandas imports.
STAND_IN_MODULES = ("ctypes", "subprocess")

# Return values that mean the function's body has not run (or not to its end): calling a
# generator or coroutine function only creates the object.
UNRUN_VALUE_TYPES = (
    (types.GeneratorType, "generator"),
    (types.CoroutineType, "coroutine"),
    (types.AsyncGeneratorType, "asynchronous generator"),
)
_KEPT_ALIVE: list[object] = []


def main(job: dict, modules: list) -> None:
    """Run the job: confine this process (the first call, which does not return), then,
    in the snippet's interpreter, set up the rest and run the snippet. ``modules``: the
    child's modules as the parent compiled them, (name, code) in the order they import each
    other; handed on to the snippet's interpreter, and their files are what the audit hook
    guards as the sandbox's own."""
    if not job.get("confined"):
        confine(job, modules)  # does not return
    result_fd, token, max_text_chars = job["result_fd"], job["token"], job["max_text_chars"]
    # stdin held the job (a memfd, which could be read again)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _set_limits(job)
    import_roots = [entry for entry in sys.path if os.path.isdir(entry)]
    packages = [tuple(entry) for entry in job["packages"]]
    if job["drop_to_uid"] is not None:
        import_roots, packages = _drop_privileges(job["drop_to_uid"], import_roots, packages)
    _offer_packages(packages)
    package_roots = tuple(path for _name, path in packages)
    workdir = job["workdir"]
    # Out of the module registry: a snippet that imports the child's modules by name gets an
    # ImportError, not the code that reports its outcome (their imports are all done).
    package = __name__.rpartition(".")[0]
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
        del sys.modules[name]
    sys.addaudithook(
        make_audit_hook(
            workdir,
            read_roots=(workdir, *import_roots, *package_roots, *SHARED_READ_PATHS),
            write_roots=(workdir, *SHARED_WRITE_PATHS),
            code_roots=(*import_roots, *package_roots),
            own_files=tuple(code.co_filename for _name, code in modules),
        )
    )
    # The token line says the sandbox is up: without it the parent knows that the setup
    # failed (and raises), since no snippet code has run before this point.
    write_all(result_fd, f"{token}\n".encode())
    ok, category, text = run_snippet(job.pop("code"))
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None:  # no standard stream to start with
            continue
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - the snippet may have replaced or closed the streams
            pass
    status = "ok" if ok else "error"
    outcome = f"{token}\n{status}\n{category}\n{text[:max_text_chars]}"
    write_all(result_fd, outcome.encode("utf-8", "backslashreplace"))
    # Skip interpreter shutdown: no atexit handlers or finalisers of snippet objects run.
    os._exit(0)


def _set_limits(job: dict) -> None:
    cpu = job["cpu_seconds"]
    limits = {
        resource.RLIMIT_AS: (job["memory_bytes"],) * 2,
        # SIGXCPU at the soft limit; the kernel's SIGKILL one second later if it is ignored
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_FSIZE: (job["file_size_bytes"],) * 2,
        # no new processes or threads (the seccomp filter refuses them too); the kernel
        # ignores this for uid 0, hence the drop
        resource.RLIMIT_NPROC: (0, 0),
        resource.RLIMIT_CORE: (0, 0),
        # also bounds what it can hide from the disk checks in files it deletes but keeps
        # open, and keeps every descriptor below EXEC_FD
        resource.RLIMIT_NOFILE: (job["max_open_files"],) * 2,
    }
    for which, limit in limits.items():
        resource.setrlimit(which, limit)


def _drop_privileges(uid: int, import_roots: list, packages: list) -> tuple:
    """Become ``uid`` for good; return the import roots and packages as paths that still
    work afterwards.

    The interpreter, its standard library and the packages may live where the unprivileged
    user may not read (under /root here), so their folders (for a package, the folder that
    holds it) are opened first and reached through the open descriptors
    (``/proc/self/fd/N``) from then on.
    """
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY) for root in import_roots]
    sys.path[:] = [f"/proc/self/fd/{fd}" for fd in fds]
    sys.path_importer_cache.clear()
    holders = {}
    reachable = []
    for name, path in packages:
        folder, entry = os.path.split(path)
        if folder not in holders:
            # O_PATH: a base for lookups only (Landlock lets the snippet read the packages
            # in this folder, not list the folder)
            holders[folder] = os.open(folder, os.O_PATH | os.O_DIRECTORY)
        reachable.append((name, f"/proc/self/fd/{holders[folder]}/{entry}"))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        raise SystemExit("sandbox: could not drop privileges")
    return list(sys.path), reachable


def _offer_packages(packages: list) -> None:
    """Make the offered packages importable (numpy, pandas and what they need; the parent
    lists them as (import name or None, path)), and nothing else from site-packages: a
    finder after the standard library's knows only these names. Also put the
    :data:`STAND_IN_MODULES` in place."""
    importable = {name: path for name, path in packages if name is not None}
    if importable:
        sys.meta_path.append(_PackageFinder(importable))
    for name in STAND_IN_MODULES:
        sys.modules[name] = _stand_in(name)


class _PackageFinder:
    """Finds the offered top-level packages and modules by name; their submodules come
    through the package's ``__path__`` as usual. What it finds is loaded only if the audit
    hook allows reading it, so a snippet that edits this finder gains nothing."""

    def __init__(self, locations: dict):
        self.locations = locations

    def find_spec(self, name, path=None, target=None):
        location = self.locations.get(name) if path is None else None
        if location is None:
            return None
        from importlib.util import spec_from_file_location

        if os.path.isdir(location):
            return spec_from_file_location(
                name, f"{location}/__init__.py", submodule_search_locations=[location]
            )
        return spec_from_file_location(name, location)


def _stand_in(name: str):
    """A module whose every attribute is refused."""
    module = types.ModuleType(name)
    message = f"{REFUSAL_PREFIX}importing {name} is not allowed, so {name}."

    def __getattr__(attribute, _message=message, _refuse=AttributeError):  # noqa: N807
        raise _refuse(_message + f"{attribute} is unavailable")

    module.__dict__["__getattr__"] = __getattr__  # the module-level hook (PEP 562)
    return module



def run_snippet(code) -> tuple:
    """(True, "", repr of the value) or (False, failure category, what went wrong)."""
    try:
        try:
            compiled = compile(code, SNIPPET_FILENAME, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in the source
            return False, "syntax", _describe(exc)
        module = type(sys)("__main__")
        sys.modules["__main__"] = module
        try:
            exec(compiled, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - whatever the snippet's code raises is its outcome
            return False, _category(exc), _describe(exc)
        function = _entry_point(module.__dict__)
        if function is None:
            return False, "no_function", "no function defined: the snippet must define a function to call"
        # every function needs arguments: the call fails binding them, before the body runs
        unbound = "missing_arguments" if not _needs_no_arguments(function) else None
        try:
            value = function()
        except BaseException as exc:  # noqa: BLE001 - whatever the snippet's function raises is its outcome
            return False, unbound or _category(exc), _describe(exc)
        if value is None:
            return False, "none_result", f"{function.__name__}() returned None"
        for unrun_type, kind in UNRUN_VALUE_TYPES:
            if type(value) is unrun_type:
                # kept until the process ends: freeing it would run the snippet's cleanup
                # (or print a "never awaited" warning)
                _KEPT_ALIVE.append(value)
                return False, "generator", (
                    f"{function.__name__}() returned a {kind}, not a value: its body does not "
                    "run until it is iterated or awaited"
                )
        try:
            return True, "", repr(value)
        except BaseException as exc:  # noqa: BLE001 - a hostile __repr__ may raise anything
            return False, _category(exc), "repr() of the returned value failed: " + _describe(exc)
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while describing another error
        return False, "exception", "the snippet failed, and describing the failure failed too"


def _category(
    exc: BaseException,
    _type=type,
    _str=str,
    _isinstance=isinstance,
    _getattr=getattr,
    _memory=MemoryError,
    _os=OSError,
    _runtime=RuntimeError,
    _refusals=(PermissionError, ImportError, AttributeError, RuntimeError),
) -> str:
    """The failure category of an exception the snippet's code raised. The builtins it
    needs are bound at definition: the snippet may have replaced them in ``builtins``."""
    if _isinstance(exc, _memory) or (_isinstance(exc, _os) and _getattr(exc, "errno") in RESOURCE_ERRNOS):
        return "resource"
    try:
        message = _str(exc) if _type(exc) in _refusals else ""
    except BaseException:  # noqa: BLE001 - a hostile exception's __str__ may raise anything
        message = ""
    if message.startswith(REFUSAL_PREFIX) or (_type(exc) is _runtime and message == THREAD_REFUSAL):
        return "refused"
    return "exception"


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
    except BaseException:  # noqa: BLE001 - a hostile exception's __str__ may raise anything
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
