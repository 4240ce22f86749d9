"""How many CPU threads a compute-bound process should use on this machine, now.

``os.cpu_count()`` counts the machine's CPUs, not the ones this process may run on (its
affinity mask, a container's CPU quota), nor the ones other work keeps busy. A small model
generating one token at a time runs many short parallel regions; each waits for its slowest
thread, so a thread that has to share its core with another process stalls all of them: on a
shared, loaded machine one thread beats two by a wide margin (bench/bench_demo_threads.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def _quota(text: str) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` line allows ("max 100000": no limit; "150000 100000": 1.5).

    >>> _quota("max 100000"), _quota("150000 100000")
    (None, 1.5)
    """
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return int(parts[0]) / int(parts[1])
    except (ValueError, ZeroDivisionError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, within its container's CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        count = os.cpu_count() or 1
    try:
        quota = _quota(CGROUP_CPU_MAX.read_text(encoding="utf-8"))
    except OSError:
        quota = None
    if quota is not None:
        count = min(count, max(1, math.floor(quota)))
    return max(1, count)


def load_average() -> float:
    """The machine's one-minute load average (0.0 where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def free_cpus(usable: int, load: float) -> int:
    """Threads for one compute-bound process: the usable CPUs that the load leaves idle
    (rounded), at least one.

    >>> free_cpus(2, 0.2), free_cpus(2, 0.9), free_cpus(2, 6.0), free_cpus(16, 3.0)
    (2, 1, 1, 13)
    """
    return max(1, min(usable, math.floor(usable - load + 0.5)))


def compute_threads() -> int:
    """:func:`free_cpus` of this machine, now."""
    return free_cpus(usable_cpus(), load_average())
