"""The seccomp filter of the snippet's process, as a classic-BPF program (pure: built from
tables here, installed by :func:`lm_eval_fin.sandbox.child.confine.install_seccomp`).

What it refuses and why is in :data:`SECCOMP_RULES`; the layer's place among the others is
in :mod:`lm_eval_fin.sandbox`. Standard library only: this module runs in the sandbox child.
"""

import struct

# <linux/seccomp.h>, <linux/filter.h>, <linux/audit.h>
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM = 1
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
X32_SYSCALL_BIT = 0x40000000
# The descriptor the confinement stage starts the snippet's interpreter from. The filter lets
# execveat run only from it; the snippet can never hold it, since RLIMIT_NOFILE keeps every
# descriptor of the snippet below MAX_OPEN_FILES (64 < 200), and it closes on exec.
EXEC_FD = 200
# one BPF instruction before encoding: ("ld" or "ret", k) or ("jeq" or "jge", k, jump if true, jump if false)
Instruction = tuple[str, int] | tuple[str, int, int, int]

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


def arch(machine: str):
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
    audit_arch, numbers, refuse_x32 = arch(machine)
    values = {SELF: pid, NEG_SELF: -pid & 0xFFFFFFFF}
    code: list[Instruction] = [("ld", 4), ("jeq", audit_arch, 1, 0), ("ret", SECCOMP_RET_KILL_PROCESS), ("ld", 0)]
    if refuse_x32:
        code += [("jge", X32_SYSCALL_BIT, 0, 1), ("ret", SECCOMP_RET_ERRNO | EPERM)]
    for name, conditions in SECCOMP_RULES:
        if name not in numbers:  # fork, vfork and mknod exist on x86_64 only
            continue
        block = _rule_block(conditions, values)
        code += [("jeq", numbers[name], 0, len(block)), *block]  # another call: skip the block
    code.append(("ret", SECCOMP_RET_ALLOW))
    return b"".join(_encode(instruction) for instruction in code)


def _rule_block(conditions, values) -> list[Instruction]:
    """The instructions after a rule's system-call test: ``ret EPERM`` for an unconditional
    refusal; else each condition in turn (any listed value passes on to the next), ``ret
    ALLOW`` when all pass and ``ret EPERM`` at the first that fails."""
    deny = ("ret", SECCOMP_RET_ERRNO | EPERM)
    if not conditions:
        return [deny]
    block: list[Instruction] = [("ret", SECCOMP_RET_ALLOW)]  # built backwards, from the last condition
    for argument, allowed in reversed(conditions):
        # after the tests: "deny" (no value matched), then the rest of the block
        tests: list[Instruction] = [("ld", 16 + 8 * argument)]
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

