"""vLLM's KV cache on CPU: a size that fits the free memory when the user set none.

vLLM's CPU build sizes its KV cache from ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB). Without it,
the engine asks for ``gpu_memory_utilization`` (0.92 on CPU) of *all* the RAM and refuses to
start, after about 40 s and a long traceback, whenever other processes hold a few GB. So
before a command starts a vLLM engine on CPU with the variable unset, :func:`settle_kv_cache`
sets it to :func:`kv_cache_gib` of the memory free now and says so in one line, or refuses in
one line (:class:`MemoryShortage`) when not even 1 GiB would fit. On a GPU build, or with the
variable set, nothing changes.

The size: a quarter of what is left after the model's weights (twice their size on disk: a
float32 load of bfloat16 files doubles them) and :data:`RUNTIME_BYTES` for torch, vLLM and
the process around the engine, in whole GiB, at most :data:`CAP_GIB`, at least 1 GiB when
that much is left. The cache is allocated in full at start (zeroed, so it is resident), and
a CPU decodes few sequences at once: a larger one would only take memory from the rest of
the machine (other runs, a judge engine started later).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path

from lm_eval_fin.plumbing import exit_status

KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
GIB = 2**30
RUNTIME_BYTES = int(1.5 * GIB)
SHARE = 0.25
CAP_GIB = 16
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


class MemoryShortage(RuntimeError):
    """Too little free memory for a vLLM engine on CPU; the message is one line naming the fix."""


def kv_cache_gib(available_bytes: int, weights_bytes: int = 0) -> int | None:
    """Whole GiB of KV cache that fit beside the weights and the runtime in ``available_bytes``,
    or None when not even 1 GiB does.

    >>> [kv_cache_gib(free * GIB, GIB // 2) for free in (18, 4, 3)], kv_cache_gib(200 * GIB)
    ([3, 1, None], 16)
    """
    spare = available_bytes - 2 * weights_bytes - RUNTIME_BYTES
    if spare < GIB:
        return None
    return max(1, min(CAP_GIB, math.floor(spare * SHARE / GIB)))


def weights_bytes(model: str | None) -> int:
    """The size of a local model folder's weight files; 0 for a hub id or anything else."""
    folder = Path(model) if model else None
    if folder is None or not folder.is_dir():
        return 0
    return sum(path.stat().st_size for path in folder.iterdir() if path.suffix in WEIGHT_SUFFIXES)


def cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (vLLM's own test: "cpu" in its version)."""
    for name, suffix in (("vllm", ""), ("vllm-cpu", "+cpu")):
        try:
            return "cpu" in importlib.metadata.version(name) + suffix
        except importlib.metadata.PackageNotFoundError:
            continue
    return False


def available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def settle_kv_cache(models: Sequence[str], command: str, environ: MutableMapping[str, str] | None = None,
                    available: int | None = None) -> str | None:
    """Before ``command`` starts vLLM engines for ``models`` (one at a time): on vLLM's CPU
    build with ``VLLM_CPU_KVCACHE_SPACE`` unset, set it in ``environ`` (default: this
    process's, which engine processes inherit) and return the line that says so; None when
    nothing changes. :class:`MemoryShortage` when too little memory is free."""
    environ = os.environ if environ is None else environ
    if not models or environ.get(KV_ENV, "").strip() or not cpu_build():
        return None
    free = available_memory() if available is None else available
    weights = max(weights_bytes(model) for model in models)
    gib = kv_cache_gib(free, weights)
    if gib is None:
        raise MemoryShortage(
            f"{free / GIB:.1f} GiB of memory is free: too little for a vLLM engine on CPU (the weights "
            f"{2 * weights / GIB:.1f} GiB, the runtime about {RUNTIME_BYTES / GIB:.1f} GiB and a KV cache of at least "
            f"1 GiB); free some memory, or set {KV_ENV} (GiB) to try anyway"
        )
    environ[KV_ENV] = str(gib)
    return (f"{command}: {KV_ENV} is unset; vLLM's KV cache takes {gib} GiB ({free / GIB:.1f} GiB of memory free); "
            f"set {KV_ENV} to choose")


def vllm_models_of_judge(spec: str | None) -> list[str]:
    """The model of a ``vllm:`` judge spec, as a list; empty for any other judge or none."""
    kind, _, model = (spec or "").strip().partition(":")
    return [model.strip()] if kind == "vllm" else []


def settle(prog: str, models: Sequence[str]) -> int:
    """Before ``prog`` starts vLLM engines for ``models`` on CPU with no KV-cache size set:
    pick one that fits and say so in one line, or refuse in one line (exit status 2) when the
    free memory is too small. 0 when the command may go on."""
    try:
        line = settle_kv_cache(models, prog)
    except MemoryShortage as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exit_status.USAGE
    if line:
        print(line, file=sys.stderr)
    return exit_status.OK
