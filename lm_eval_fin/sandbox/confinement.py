"""What a sandbox child runs under: the limits a caller sets (:class:`Limits`) and the
kernel isolation found on this machine (:class:`Isolation`, probed by
:mod:`lm_eval_fin.sandbox.probe`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

UNPRIVILEGED_UID = 65534  # "nobody"; also used as the gid


@dataclass(frozen=True)
class Limits:
    """What one snippet may use; :func:`~lm_eval_fin.sandbox.run_code` and
    :func:`~lm_eval_fin.sandbox.run_codes` take these fields as keyword arguments.

    ``timeout``: wall-clock seconds for the whole child, start-up included. ``memory_mb``:
    address space. ``cpu_seconds``: CPU time, in whole seconds rounded up (default: the
    timeout). ``file_size_mb``: largest file it may write (in its working directory, the
    only place it may write). ``disk_mb``: all it may keep in its working directory at once
    (besides at most :data:`~lm_eval_fin.sandbox.runner.MAX_WORKDIR_ENTRIES` files and
    folders). ``max_output_bytes``: printing more stops the snippet, a failure.
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

