"""What isolation this machine gives the sandbox: probed once per process by starting real
children under each candidate (namespaces, Landlock) until one passes; logged when weaker
than the full sandbox."""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import replace

from .confinement import UNPRIVILEGED_UID, Isolation, Limits
from .results import SandboxError
from .runner import SHIPPED_CHILD_MODULES, run_in_child
from .watchdog import DISK_CHECK_INTERVAL_S

# unshare(2) flags, and the sets tried in order (the first that works is used)
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
NAMESPACE_CHOICES: tuple[tuple[tuple[str, ...], int], ...] = (
    (("mount", "network", "ipc"), CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC),
    (("mount",), CLONE_NEWNS),
)
_PROBE_TIMEOUT_S = 20.0
NO_NAMESPACES_VARIABLE = "LM_EVAL_FIN_SANDBOX_NO_NAMESPACES"  # set to 1: no namespaces
NO_LANDLOCK_VARIABLE = "LM_EVAL_FIN_SANDBOX_NO_LANDLOCK"  # set to 1: no Landlock

_LANDLOCK_CREATE_RULESET = 444  # the same on every architecture

# the warning is the sandbox's, whichever of its modules finds the gap
logger = logging.getLogger(__package__)

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
            f"{DISK_CHECK_INTERVAL_S * 1000:g} ms rather than bounded by a tmpfs."
        )
    if not found.landlock_abi:
        owner = "you own" if found.own_user else f"uid {found.snippet_uid} may write"
        gaps.append(
            f"No Landlock ({found.landlock_reason}): only the audit hook keeps snippets from "
            f"writing files {owner} outside their folder and from reading them, which native "
            "code (through some CPython bug) would get past."
        )
    return gaps


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
    choices: list[tuple[tuple[str, ...], int]]
    if os.environ.get(NO_NAMESPACES_VARIABLE, "").strip() not in ("", "0"):
        choices, reasons = [], [f"turned off by {NO_NAMESPACES_VARIABLE}"]
    elif os.geteuid() != 0:
        choices, reasons = [], ["not running as root (namespaces here need CAP_SYS_ADMIN)"]
    else:
        choices, reasons = list(NAMESPACE_CHOICES), []
    landlock_failures: list[str] = []
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
                result = run_in_child(probe, Limits(timeout=_PROBE_TIMEOUT_S), candidate, SHIPPED_CHILD_MODULES)
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

