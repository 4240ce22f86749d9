"""Child side of :mod:`lm_eval_fin.sandbox`: runs ONE model-written snippet, then exits.

The parent compiles this file once and starts, per snippet, ``python -I -S -c <stub>`` in a
fresh temporary directory; the stub reads this code and the job (a dict the parent built)
from stdin and calls :func:`main`. On the result descriptor the job names, the child writes
the job's token once the sandbox is set up, and at the end the token again, ``ok`` or
``error``, the failure category (empty when ok) and the value's repr or the error, one per
line. Standard library only: the package itself is not importable in the child.

The child runs in two stages, in two interpreters:

1. Confinement (:func:`_confine`). Kernel namespaces when the job asks for them (still
   root), then Landlock where the kernel has it, then the seccomp filter
   (:func:`seccomp_program`). All of that goes through ``ctypes``, which must never be
   loaded where the snippet runs, so the stage ends by replacing itself with a fresh
   interpreter (``execveat`` of a descriptor only this stage can hold: the filter refuses
   every other way to start a program), which gets the job through a memfd as its stdin.
   Landlock, the filter and the namespaces carry over to it and cannot be undone.
2. The snippet (the rest of :func:`main`). Limits first, so that they hold whatever runs
   later, then the privileges go, then numpy and pandas are offered, then the audit hook
   goes in, and only then is the snippet compiled.

:mod:`lm_eval_fin.sandbox` describes the layers and what they leave open.
"""

import marshal
import os
import resource
import struct
import sys
import types

SNIPPET_FILENAME = "<snippet>"

# What a failed snippet is counted as (lm_eval_fin.sandbox.failure_categories; DESIGN.md).
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
REFUSAL_PREFIX = "sandbox: "  # every refusal of the audit hook and the stand-in modules
THREAD_REFUSAL = "can't start new thread"  # CPython's message when clone is refused
# errno values of a limit reached: RLIMIT_FSIZE, a full tmpfs, RLIMIT_NOFILE, quotas
RESOURCE_ERRNOS = frozenset({27, 28, 24, 23, 122})  # EFBIG ENOSPC EMFILE ENFILE EDQUOT

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
# (ctypes.WinError) or in a helper that lists locales (subprocess): in the snippet they are
# stand-ins whose every attribute is refused, so that pandas imports.
STAND_IN_MODULES = ("ctypes", "subprocess")

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
# Read by C code below the audit hook (the dynamic loader, the C library's time zone), so
# Landlock must let them through: they are no secret.
SYSTEM_READ_PATHS = ("/etc/ld.so.cache", "/etc/localtime")

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

# --- seccomp (<linux/seccomp.h>, <linux/filter.h>, <linux/audit.h>) ---------------------
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM = 1
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
X32_SYSCALL_BIT = 0x40000000
AT_EMPTY_PATH = 0x1000
# The descriptor the confinement stage starts the snippet's interpreter from. The filter lets
# execveat run only from it; the snippet can never hold it, since RLIMIT_NOFILE keeps every
# descriptor of the snippet below MAX_OPEN_FILES (64 < 200), and it closes on exec.
EXEC_FD = 200

# System call numbers the filter names. x86_64 from <asm/unistd_64.h>; aarch64 uses the
# generic table (<asm-generic/unistd.h>), which has no fork, vfork or mknod.
X86_64_SYSCALLS = {
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "memfd_create": 319, "memfd_secret": 447, "mknod": 133, "mknodat": 259,
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
    "socket": 41, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "process_madvise": 440, "kcmp": 312, "prlimit64": 302, "setpriority": 141,
    "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
    "sched_setattr": 314, "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 323, "bpf": 321, "perf_event_open": 298,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "setns": 308,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "shmget": 29, "msgget": 68, "semget": 64, "mq_open": 240,
    "open_by_handle_at": 304, "name_to_handle_at": 303,
}  # fmt: skip
GENERIC_SYSCALLS = {
    "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "memfd_create": 279, "memfd_secret": 447, "mknodat": 33,
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281,
    "socket": 198, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "process_madvise": 440, "kcmp": 272, "prlimit64": 261, "setpriority": 140,
    "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
    "sched_setattr": 274, "ioprio_set": 30, "migrate_pages": 238, "move_pages": 239,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 282, "bpf": 280, "perf_event_open": 241,
    "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97, "setns": 268,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "shmget": 194, "msgget": 186, "semget": 190, "mq_open": 180,
    "open_by_handle_at": 265, "name_to_handle_at": 264,
}  # fmt: skip
# machine (os.uname) -> (AUDIT_ARCH_*, its table, whether x32 calls must be refused)
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, X86_64_SYSCALLS, True),
    "aarch64": (0xC00000B7, GENERIC_SYSCALLS, False),
    "arm64": (0xC00000B7, GENERIC_SYSCALLS, False),
}
SELF, NEG_SELF = "self", "-self"  # the child's pid, and its process group as kill() names it
# What the filter refuses (EPERM). A call with conditions runs only when every condition
# holds: (argument index, the values it may take; only the low 32 bits are compared, which
# is all the kernel reads of these int and pid_t arguments). Not listed: allowed.
SECCOMP_RULES = (
    # signals and process handles: the snippet's own process only (it is alone in its
    # process group and session, and can start no other)
    ("kill", ((0, (SELF, 0, NEG_SELF)),)),
    ("tkill", ((0, (SELF,)),)),
    ("tgkill", ((0, (SELF,)),)),
    ("rt_sigqueueinfo", ((0, (SELF,)),)),
    ("rt_tgsigqueueinfo", ((0, (SELF,)),)),
    ("pidfd_open", ((0, (SELF,)),)),
    ("pidfd_send_signal", None),  # the descriptor could be any process's /proc entry
    ("pidfd_getfd", None),
    ("prlimit64", ((0, (SELF, 0)),)),
    ("setpriority", ((0, (0,)), (1, (SELF, 0)))),  # PRIO_PROCESS, itself
    ("sched_setaffinity", ((0, (SELF, 0)),)),
    ("sched_setscheduler", ((0, (SELF, 0)),)),
    ("sched_setparam", ((0, (SELF, 0)),)),
    ("sched_setattr", ((0, (SELF, 0)),)),
    ("ioprio_set", None),
    ("ptrace", None),
    ("process_vm_readv", None),
    ("process_vm_writev", None),
    ("process_madvise", None),
    ("kcmp", None),
    ("migrate_pages", None),
    ("move_pages", None),
    # no new processes, threads or programs
    ("fork", None),
    ("vfork", None),
    ("clone", None),
    ("clone3", None),
    ("execve", None),
    ("execveat", ((0, (EXEC_FD,)),)),
    # memory outside RLIMIT_AS, and files made without an audit event
    ("memfd_create", None),
    ("memfd_secret", None),
    ("shmget", None),
    ("msgget", None),
    ("semget", None),
    ("mq_open", None),
    ("mknod", None),
    ("mknodat", None),
    # no network, and none of the kernel's larger attack surfaces
    ("socket", None),
    ("io_uring_setup", None),
    ("io_uring_enter", None),
    ("io_uring_register", None),
    ("userfaultfd", None),
    ("bpf", None),
    ("perf_event_open", None),
    ("add_key", None),
    ("request_key", None),
    ("keyctl", None),
    ("open_by_handle_at", None),
    ("name_to_handle_at", None),
    # no new namespaces (a user namespace would hand out capabilities) and no mounts
    ("unshare", None),
    ("setns", None),
    ("mount", None),
    ("umount2", None),
    ("pivot_root", None),
    ("chroot", None),
    ("open_tree", None),
    ("move_mount", None),
    ("fsopen", None),
    ("fsconfig", None),
    ("fsmount", None),
    ("fspick", None),
    ("mount_setattr", None),
)

# --- Landlock (<linux/landlock.h>); system call numbers are the same on every architecture
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RULE_PATH_BENEATH = 1
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_REMOVE_DIR, LL_REMOVE_FILE, LL_MAKE_CHAR, LL_MAKE_DIR = 16, 32, 64, 128
LL_MAKE_REG, LL_MAKE_SOCK, LL_MAKE_FIFO, LL_MAKE_BLOCK, LL_MAKE_SYM = 256, 512, 1024, 2048, 4096
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1, 2
LL_SCOPE_ABSTRACT_UNIX_SOCKET, LL_SCOPE_SIGNAL = 1, 2
# File-system rights Landlock knows from each ABI version on. Execution is left to the
# seccomp filter (which refuses every new program), so it is not handled here.
LANDLOCK_FS_RIGHTS = (
    (1, LL_WRITE_FILE | LL_READ_FILE | LL_READ_DIR | LL_REMOVE_DIR | LL_REMOVE_FILE
     | LL_MAKE_CHAR | LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK
     | LL_MAKE_SYM),
    (2, LL_REFER),
    (3, LL_TRUNCATE),
    (5, LL_IOCTL_DEV),
)  # fmt: skip
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_READ = LL_READ_FILE | LL_READ_DIR


def main(job: dict, child_code=None) -> None:
    if not job.get("confined"):
        _confine(job, child_code)  # does not return
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
    sys.addaudithook(
        _make_audit_hook(
            workdir,
            read_roots=(workdir, *import_roots, *package_roots, *SHARED_READ_PATHS),
            write_roots=(workdir, *SHARED_WRITE_PATHS),
            code_roots=(*import_roots, *package_roots),
        )
    )
    # The token line says the sandbox is up: without it the parent knows that the setup
    # failed (and raises), since no snippet code has run before this point.
    _write_all(result_fd, f"{token}\n".encode())
    ok, category, text = _run_snippet(job.pop("code"))
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # the snippet may have replaced or closed the streams
            pass
    status = "ok" if ok else "error"
    outcome = f"{token}\n{status}\n{category}\n{text[:max_text_chars]}"
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


# --- stage one: confinement -------------------------------------------------------------


def _confine(job: dict, child_code) -> None:
    """Stage one: enter the namespaces (if asked), apply Landlock (if the kernel has it) and
    the seccomp filter, then start the snippet's interpreter from :data:`EXEC_FD`. Never
    returns; a failure exits without the token, and the parent raises SandboxError."""
    step = "set up the namespaces"
    try:
        kernel = Kernel()
        if job["namespaces"]:
            _isolate(kernel, job["namespaces"], job["workdir"], job["disk_bytes"], job["max_entries"],
                     job["drop_to_uid"])  # fmt: skip
        step = "open the interpreter"
        interpreter = os.open(sys.executable, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(interpreter, EXEC_FD, inheritable=False)
        os.close(interpreter)
        step = "hand the job on"
        job["confined"] = True
        job_fd = os.memfd_create("sandbox-job", 0)  # before the filter refuses memfds
        _write_all(job_fd, marshal.dumps((child_code, job)))
        os.lseek(job_fd, 0, os.SEEK_SET)
        os.dup2(job_fd, 0)  # inheritable
        os.close(job_fd)
        step = "set up Landlock"
        if job["landlock_abi"]:
            apply_landlock(kernel, job["landlock_abi"], job["workdir"], _landlock_read_paths(job))
        step = "install the seccomp filter"
        install_seccomp(kernel, seccomp_program(os.uname().machine, os.getpid()))
        step = "start the snippet's interpreter"
        argv = [sys.executable, "-I", "-S", "-c", job["stub"]]
        environment = [f"{name}={value}" for name, value in os.environ.items()]
        kernel.call("syscall", _arch(os.uname().machine)[1]["execveat"], EXEC_FD, b"", kernel.strings(argv),
                    kernel.strings(environment), AT_EMPTY_PATH, what="execveat")  # fmt: skip
    except OSError as exc:
        where = exc.filename or f"errno {exc.errno}"
        raise SystemExit(f"sandbox: could not {step}: {exc.strerror} ({where})") from None
    except ValueError as exc:  # an architecture the filter does not know
        raise SystemExit(f"sandbox: could not {step}: {exc}") from None


class Kernel:
    """The C library through ``_ctypes`` (the bare module: importing ``ctypes`` would cost
    more than the rest of the stage), for the confinement stage only; the snippet's
    interpreter never loads it. Buffers live as long as this object."""

    def __init__(self):
        import _ctypes

        class Long(_ctypes._SimpleCData):
            _type_ = "l"

        class Char(_ctypes._SimpleCData):
            _type_ = "c"

        class Function(_ctypes.CFuncPtr):  # long f(...), errno kept
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Long

        self._ctypes, self._long, self._char, self._function = _ctypes, Long, Char, Function
        self._libc = _ctypes.dlopen(None)
        self._buffers = []

    def call(self, name: str, *args, what: str) -> int:
        """The C library's ``name(*args)``; OSError (naming ``what``) when it returns less
        than 0. Every int goes as a C long: the variadic syscall() and prctl() read longs."""
        function = self._function(self._ctypes.dlsym(self._libc, name))
        returned = function(*[self._long(arg) if type(arg) is int else arg for arg in args])
        if returned < 0:
            errno = self._ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), what)
        return returned

    def buffer(self, data: bytes) -> int:
        """The address of a copy of ``data`` (kept alive with this object)."""
        array_type = type("Buffer", (self._ctypes.Array,), {"_type_": self._char, "_length_": max(1, len(data))})
        copy = array_type.from_buffer_copy(data.ljust(1, b"\0"))
        self._buffers.append(copy)
        return self._ctypes.addressof(copy)

    def strings(self, values) -> int:
        """The address of a NULL-terminated ``char *[]`` of ``values``."""
        pointers = [self.buffer(os.fsencode(value) + b"\0") for value in values]
        return self.buffer(struct.pack(f"={len(pointers) + 1}Q", *pointers, 0))


def _isolate(kernel: Kernel, flags: int, workdir: str, disk_bytes: int, max_entries: int, uid) -> None:
    """New namespaces (``flags`` for unshare(2)); every mount read-only in them; a tmpfs of
    ``disk_bytes`` and ``max_entries`` inodes, owned by ``uid``, as the working directory."""
    call = kernel.call
    call("unshare", flags, what="unshare")
    # keep every mount change below inside the new namespace
    call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None, what="/")
    for mount_point, options in _mount_points():
        remount = MS_BIND | MS_REMOUNT | MS_RDONLY
        for option, flag in MOUNT_OPTION_FLAGS:
            if option in options:
                remount |= flag
        try:
            call("mount", None, mount_point, None, remount, None, what=os.fsdecode(mount_point))
        except FileNotFoundError:  # a mount point deleted since; nothing to reach there
            pass
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    tmpfs_options = f"size={disk_bytes},nr_inodes={max_entries},mode=0700{owner}"
    call("mount", b"tmpfs", os.fsencode(workdir), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
         tmpfs_options.encode(), what=workdir)  # fmt: skip
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


def _arch(machine: str):
    try:
        return SECCOMP_ARCHES[machine]
    except KeyError:
        raise ValueError(
            f"the seccomp filter knows the system calls of {', '.join(sorted(SECCOMP_ARCHES))} "
            f"only, not {machine}"
        ) from None


def seccomp_program(machine: str, pid: int) -> bytes:
    """The classic-BPF seccomp filter of :data:`SECCOMP_RULES` for ``machine`` (``os.uname``)
    and a child of process id ``pid``, as the kernel reads it (``struct sock_filter[]``).

    Calls of another architecture kill the process (an x86_64 process could make i386
    calls); x32 calls are refused. Jumps are forward and short: each rule is a block that
    either returns or skips to the next rule, so no offset comes near the 255 limit."""
    audit_arch, numbers, refuse_x32 = _arch(machine)
    values = {SELF: pid, NEG_SELF: -pid & 0xFFFFFFFF}
    code = [("ld", 4), ("jeq", audit_arch, 1, 0), ("ret", SECCOMP_RET_KILL_PROCESS), ("ld", 0)]
    if refuse_x32:
        code += [("jge", X32_SYSCALL_BIT, 0, 1), ("ret", SECCOMP_RET_ERRNO | EPERM)]
    for name, conditions in SECCOMP_RULES:
        if name not in numbers:  # fork, vfork and mknod exist on x86_64 only
            continue
        block = _rule_block(conditions, values)
        code += [("jeq", numbers[name], 0, len(block)), *block]  # another call: skip the block
    code.append(("ret", SECCOMP_RET_ALLOW))
    return b"".join(_encode(instruction) for instruction in code)


def _rule_block(conditions, values) -> list:
    """The instructions after a rule's system-call test: ``ret EPERM`` for an unconditional
    refusal; else each condition in turn (any listed value passes on to the next), ``ret
    ALLOW`` when all pass and ``ret EPERM`` at the first that fails."""
    deny = ("ret", SECCOMP_RET_ERRNO | EPERM)
    if not conditions:
        return [deny]
    block = [("ret", SECCOMP_RET_ALLOW)]  # built backwards, from the last condition
    for argument, allowed in reversed(conditions):
        # after the tests: "deny" (no value matched), then the rest of the block
        tests = [("ld", 16 + 8 * argument)]
        for index, value in enumerate(allowed):
            after_me = len(allowed) - index - 1  # tests still to come
            tests.append(("jeq", values.get(value, value) & 0xFFFFFFFF, after_me + 1, 0))
        block = tests + [deny] + block
    return block


def _encode(instruction) -> bytes:
    op = instruction[0]
    if op == "ld":  # A = 32-bit word at this offset of struct seccomp_data
        return struct.pack("=HBBI", BPF_LD_W_ABS, 0, 0, instruction[1])
    if op == "ret":
        return struct.pack("=HBBI", BPF_RET_K, 0, 0, instruction[1])
    value, if_true, if_false = instruction[1:]
    if not (0 <= if_true <= 255 and 0 <= if_false <= 255):
        raise ValueError(f"BPF jump out of range: {instruction}")
    code = BPF_JEQ_K if op == "jeq" else BPF_JGE_K
    return struct.pack("=HBBI", code, if_true, if_false, value)


def install_seccomp(kernel: Kernel, program: bytes) -> None:
    """Install ``program`` (:func:`seccomp_program`) on this process and all it executes,
    for good."""
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
    fprog = kernel.buffer(struct.pack("=HxxxxxxQ", len(program) // 8, kernel.buffer(program)))
    kernel.call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, what="PR_SET_NO_NEW_PRIVS")
    kernel.call("prctl", PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0, what="PR_SET_SECCOMP")


def landlock_rights(abi: int) -> tuple:
    """(file-system rights handled, network rights handled, scopes) at Landlock ABI ``abi``:
    everything that ABI can restrict except execution."""
    fs = 0
    for since, rights in LANDLOCK_FS_RIGHTS:
        if abi >= since:
            fs |= rights
    net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP if abi >= 4 else 0
    scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scoped


def _landlock_read_paths(job: dict) -> list:
    """What the snippet's interpreter may read under Landlock: what the audit hook lets it
    read (the standard library, the offered packages, the shared devices), plus what C code
    reads below the hook: the interpreter, the folders of the shared libraries it has
    loaded (extension modules load theirs from there), the loader's cache, the time zone."""
    paths = [entry for entry in sys.path if os.path.isdir(entry)]
    paths += [path for _name, path in job["packages"]]
    paths += [*SHARED_READ_PATHS, *SYSTEM_READ_PATHS, os.path.realpath(sys.executable)]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/"):
                paths.append(os.path.dirname(fields[5].rstrip("\n")))
    return paths


def apply_landlock(kernel: Kernel, abi: int, workdir: str, read_paths) -> None:
    """Restrict this process and what it executes, for good: read only ``read_paths`` and
    the working directory, write only in the working directory (and /dev/null); from ABI 4
    no TCP, from ABI 6 no signals or abstract sockets outside this process."""
    call = kernel.call
    fs, net, scoped = landlock_rights(abi)
    attr = kernel.buffer(struct.pack("=QQQ", fs, net, scoped))  # struct landlock_ruleset_attr
    ruleset = call("syscall", LANDLOCK_CREATE_RULESET, attr, 24, 0, what="landlock_create_ruleset")
    rules = [(path, LL_READ) for path in dict.fromkeys(read_paths)]
    rules += [(path, LL_WRITE_FILE | LL_TRUNCATE) for path in SHARED_WRITE_PATHS]
    rules.append((workdir, fs))
    try:
        for path, rights in rules:
            try:
                target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:  # not on this machine (/etc/localtime, a library folder)
                continue
            try:
                if not os.path.isdir(f"/proc/self/fd/{target}"):
                    rights &= LL_FILE_RIGHTS
                rule = kernel.buffer(struct.pack("=Qi", rights & fs, target))  # landlock_path_beneath_attr
                call("syscall", LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0,
                     what=f"landlock_add_rule {path}")  # fmt: skip
            finally:
                os.close(target)
        call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, what="PR_SET_NO_NEW_PRIVS")
        call("syscall", LANDLOCK_RESTRICT_SELF, ruleset, 0, what="landlock_restrict_self")
    finally:
        os.close(ruleset)


# --- stage two: the snippet's interpreter -------------------------------------------------


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

    module.__getattr__ = __getattr__
    return module


def _make_audit_hook(workdir: str, read_roots: tuple, write_roots: tuple, code_roots: tuple):
    """The audit hook that refuses what the sandbox forbids.

    ``code_roots``: where native extension modules may be loaded from (the standard library
    and the offered packages; never the working directory, where the snippet can write).

    The hook runs inside the snippet's process, so it is written to give the snippet no
    handle on its decisions:

    - Everything the hook and its helpers use is bound here as a positional default
      argument, immutable (str, tuples, frozensets, builtin types and functions): the snippet
      may rebind names in ``builtins``, ``os`` or ``sys.modules``, or read these bindings
      from a traceback's frames, and the hook still decides the same. Replacing the defaults
      or code of this module's functions is itself refused (the ``object.__setattr__``
      event).
    - It never calls code the snippet wrote: it inspects only exact ``str``, ``bytes`` and
      ``int`` values (events carry paths already converted by ``os.fspath``) and refuses
      anything else, without printing it.
    """
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    function_type = type(_make_audit_hook)
    own_file = _make_audit_hook.__code__.co_filename  # this module's, as the parent compiled it

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
        _own_file=own_file,
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
            # this module's functions (the hook's bindings), allowed for any other
            # (collections.namedtuple sets __defaults__)
            if _type(args[0]) is _function and args[0].__code__.co_filename == _own_file:
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


def _run_snippet(code) -> tuple:
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
        except BaseException as exc:
            return False, _category(exc), _describe(exc)
        function = _entry_point(module.__dict__)
        if function is None:
            return False, "no_function", "no function defined: the snippet must define a function to call"
        # every function needs arguments: the call fails binding them, before the body runs
        unbound = "missing_arguments" if not _needs_no_arguments(function) else None
        try:
            value = function()
        except BaseException as exc:
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
        except BaseException as exc:
            return False, _category(exc), "repr() of the returned value failed: " + _describe(exc)
    except BaseException:  # e.g. MemoryError while describing another error
        return False, "exception", "the snippet failed, and describing the failure failed too"


def _category(
    exc: BaseException,
    _type=type,
    _str=str,
    _isinstance=isinstance,
    _memory=MemoryError,
    _os=OSError,
    _runtime=RuntimeError,
    _refusals=(PermissionError, ImportError, AttributeError, RuntimeError),
) -> str:
    """The failure category of an exception the snippet's code raised. The builtins it
    needs are bound at definition: the snippet may have replaced them in ``builtins``."""
    if _isinstance(exc, _memory) or (_isinstance(exc, _os) and exc.errno in RESOURCE_ERRNOS):
        return "resource"
    try:
        message = _str(exc) if _type(exc) in _refusals else ""
    except BaseException:
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
