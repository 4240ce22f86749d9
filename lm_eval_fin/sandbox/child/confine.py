"""Stage one of the sandbox child: confine the process, then start the snippet's interpreter.

Kernel namespaces when the job asks for them (still root), then Landlock where the kernel
has it, then the seccomp filter. All of that goes through ``_ctypes``, which must never be
loaded where the snippet runs, so the stage ends by replacing itself with a fresh
interpreter (``execveat`` of :data:`~lm_eval_fin.sandbox.child.seccomp.EXEC_FD`, a
descriptor only this stage can hold: the filter refuses every other way to start a
program), which gets the job through a memfd as its stdin. Landlock, the filter and the
namespaces carry over to it and cannot be undone. Standard library only: this module runs in
the sandbox child.
"""

import marshal
import os
import struct
import sys

from .audit import SHARED_READ_PATHS, SHARED_WRITE_PATHS
from .seccomp import EXEC_FD, arch, seccomp_program

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AT_EMPTY_PATH = 0x1000
# Read by C code below the audit hook (the dynamic loader, the C library's time zone), so
# Landlock must let them through: they are no secret.
SYSTEM_READ_PATHS = ("/etc/ld.so.cache", "/etc/localtime")

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


def confine(job: dict, modules) -> None:
    """Stage one: enter the namespaces (if asked), apply Landlock (if the kernel has it) and
    the seccomp filter, then start the snippet's interpreter from :data:`EXEC_FD`, handing
    it ``modules`` (the child's compiled modules, as the parent sent them) and the job.
    Never returns; a failure exits without the token, and the parent raises SandboxError."""
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
        write_all(job_fd, marshal.dumps((modules, job)))
        os.lseek(job_fd, 0, os.SEEK_SET)
        os.dup2(job_fd, 0)  # inheritable
        os.close(job_fd)
        step = "set up Landlock"
        if job["landlock_abi"]:
            apply_landlock(kernel, job["landlock_abi"], job["workdir"], landlock_read_paths(job))
        step = "install the seccomp filter"
        install_seccomp(kernel, seccomp_program(os.uname().machine, os.getpid()))
        step = "start the snippet's interpreter"
        argv = [sys.executable, "-I", "-S", "-c", job["stub"]]
        environment = [f"{name}={value}" for name, value in os.environ.items()]
        kernel.call("syscall", arch(os.uname().machine)[1]["execveat"], EXEC_FD, b"", kernel.strings(argv),
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

    def __init__(self) -> None:
        import _ctypes

        class Long(_ctypes._SimpleCData):
            _type_ = "l"

        class Char(_ctypes._SimpleCData):
            _type_ = "c"

        class Function(_ctypes.CFuncPtr):  # long f(...), errno kept
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Long

        self._ctypes, self._long, self._char, self._function = _ctypes, Long, Char, Function
        self._libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # typeshed: None (the program itself) is allowed
        self._buffers: list[object] = []

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
        copy = (self._char * max(1, len(data))).from_buffer_copy(data.ljust(1, b"\0"))
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


def _mount_points() -> list[tuple[bytes, list[bytes]]]:
    """(mount point, options) of every mount this process sees, from /proc/self/mountinfo (read
    whole before any of them is remounted)."""
    with open("/proc/self/mountinfo", "rb") as handle:
        fields_of_lines = [line.split(b" ") for line in handle]
    return [(_unescape_mount_path(fields[4]), fields[5].split(b",")) for fields in fields_of_lines if len(fields) > 5]


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


def landlock_read_paths(job: dict) -> list:
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


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

