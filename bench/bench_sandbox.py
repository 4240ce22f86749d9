"""Sandbox throughput, per-snippet overhead and memory, against peers measured in the same run.

Ours: lm_eval_fin.sandbox with every layer on (fresh ``python -I -S`` child per snippet,
namespaces when root, Landlock and the seccomp filter, limits, unprivileged user when root,
audit hook, session kill, temp dir removed).
Peers: a bare ``subprocess.run([sys.executable, "-c", driver])`` per snippet with no
isolation at all (what a naive scorer would do), the same with ``-I -S`` (our interpreter
start-up without our layers), and ``exec`` in this process.

The snippets are FinLFQA-like: mostly small calculations, plus the paper's common failures
(parameters, no return, indentation). Goal: at least 20 snippets/s on 2 cores. Also: what a
pandas snippet costs, the address space pandas needs, and how much memory a hostile snippet
can hold outside its address-space limit (memfds, /dev/shm, deleted files, pipes), read
from the kernel's shared-memory count while it holds it.

    python bench/bench_sandbox.py
"""

from __future__ import annotations

import ast
import os
import resource
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

from lm_eval_fin.sandbox import run_code, run_codes

SNIPPETS = [
    "def net_margin():\n    revenue = 1520.3\n    income = 212.8\n    return income / revenue\n",
    "import math\n\ndef cagr():\n    return (math.pow(1820.0 / 1432.1, 1 / 3) - 1) * 100\n",
    "def growth(current, previous):\n    return (current - previous) / previous\n",
    "def difference():\n    cwt = 3.965\n    awk = 3.1\n    gap = cwt - awk\n",
    "def ratio():\n    debt = 410.0\n      equity = 980.0\n    return debt / equity\n",
    "from statistics import mean\n\ndef average_eps():\n    return mean([1.21, 1.35, 1.42])\n",
    "def total():\n    segments = {'water': 911.2, 'gas': 2.4}\n    return sum(segments.values())",
    "def f():\n    return [round(x * 1.05, 2) for x in (100.0, 250.0, 75.5)]\n",
]

PANDAS_SNIPPET = """\
import numpy as np
import pandas as pd

def margin():
    frame = pd.DataFrame({"revenue": np.array([1520.3, 1610.0]), "income": [212.8, 230.1]})
    return float((frame.income / frame.revenue).mean())
"""
MEMORY_LIMIT_MB = 512  # the sandbox's default address-space limit
# Holds all the memory it can outside its address space, by every route a snippet has, then
# waits so that the parent can read the kernel's count, and returns what it holds per route.
HOLDER_SNIPPET = """\
import _imp, importlib.machinery, os, time

def hold():
    posix = _imp.create_builtin(importlib.machinery.ModuleSpec("posix", None))
    held, kept, chunk = {}, [], b"x" * (1 << 20)

    def fill(route, open_one):
        # open and fill one descriptor after another; stop at the first that takes nothing
        # (the route is full), or when opening fails (refused, or out of descriptors)
        held[route] = 0
        try:
            while True:
                fd, before = open_one(), held[route]
                try:
                    while True:
                        written = os.write(fd, chunk)
                        if not written:
                            break
                        held[route] += written
                except OSError:
                    pass  # this one is full (file-size limit, full pipe, full tmpfs)
                if held[route] == before:
                    os.close(fd)
                    held[route + " stopped by"] = "full"
                    return
                kept.append(fd)
        except Exception as error:
            held[route + " stopped by"] = type(error).__name__

    fill("memfd", lambda: posix.memfd_create("held", 0))
    fill("dev_shm", lambda: os.open(f"/dev/shm/held-{len(kept)}", os.O_RDWR | os.O_CREAT, 0o600))

    def deleted_file():
        name = f"deleted-{len(kept)}"
        fd = os.open(os.getcwd() + "/" + name, os.O_RDWR | os.O_CREAT, 0o600)
        os.remove(name)
        return fd

    fill("deleted_files", deleted_file)

    def pipe():
        read_end, write_end = os.pipe()
        kept.append(read_end)
        os.set_blocking(write_end, False)
        return write_end

    fill("pipes", pipe)
    time.sleep(2)  # held: the parent reads the kernel's shared-memory count now
    return held
"""

PEER_DRIVER = """\
import sys, types
namespace = {"__name__": "__main__"}
exec(compile(sys.stdin.read(), "<snippet>", "exec"), namespace)
functions = [v for v in namespace.values()
             if isinstance(v, types.FunctionType) and v.__code__.co_filename == "<snippet>"]
print(repr(max(functions, key=lambda f: f.__code__.co_firstlineno)()))
"""


def _bare_subprocess(code: str, flags: tuple[str, ...] = ()) -> bool:
    done = subprocess.run(
        [sys.executable, *flags, "-c", PEER_DRIVER],
        input=code,
        capture_output=True,
        text=True,
        timeout=120,  # generous: a crowded machine must not turn a slow peer into a crash
    )
    return done.returncode == 0 and done.stdout.strip() != "None"


def _minimal_subprocess(code: str) -> bool:
    return _bare_subprocess(code, ("-I", "-S"))


def _in_process(code: str) -> bool:
    try:
        namespace = {"__name__": "__main__"}
        exec(compile(code, "<snippet>", "exec"), namespace)
        functions = [
            v
            for v in namespace.values()
            if isinstance(v, types.FunctionType) and v.__code__.co_filename == "<snippet>"
        ]
        return max(functions, key=lambda f: f.__code__.co_firstlineno)() is not None
    except Exception:  # noqa: BLE001 - the reference runner: a snippet that raises did not run
        return False


def _throughput(run_all, codes) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    oks = run_all(codes)
    return len(codes) / (time.perf_counter() - started), oks


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended, user and system."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _interleaved_latency_ms(runners: dict, codes, cpu: dict | None = None) -> dict[str, float]:
    """Mean milliseconds per snippet for each runner, taking turns snippet by snippet so that
    all of them see the same load on a shared machine. ``cpu``, if given, receives the mean
    CPU milliseconds per snippet (this process and its children), which a crowded machine
    disturbs far less than the wall clock."""
    totals, cpu_totals = dict.fromkeys(runners, 0.0), dict.fromkeys(runners, 0.0)
    for code in codes:
        for name, run_one in runners.items():
            started, cpu_started = time.perf_counter(), _cpu_seconds()
            run_one(code)
            totals[name] += time.perf_counter() - started
            cpu_totals[name] += _cpu_seconds() - cpu_started
    if cpu is not None:
        cpu.update({name: total / len(codes) * 1000 for name, total in cpu_totals.items()})
    return {name: total / len(codes) * 1000 for name, total in totals.items()}


def _shmem_kib() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


def _held_outside_address_space() -> tuple[dict, float]:
    """Run :data:`HOLDER_SNIPPET`; (what it says it held per route, peak rise of the
    kernel's shared memory in MiB while it ran)."""
    baseline, peak, done = _shmem_kib(), 0, threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _shmem_kib() - baseline)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_code(HOLDER_SNIPPET, timeout=60, memory_mb=MEMORY_LIMIT_MB)
    finally:
        done.set()
        watcher.join()
    held = ast.literal_eval(result.value) if result.ok else {"failed": result.error}
    return held, peak / 1024


def _smallest_memory_for_pandas(step_mb: int = 10) -> int | None:
    """The smallest address-space limit, in steps of ``step_mb``, under which the pandas
    snippet runs (None if it does not run at the default)."""
    if not run_code(PANDAS_SNIPPET, timeout=60, memory_mb=MEMORY_LIMIT_MB).ok:
        return None
    low, high = 0, MEMORY_LIMIT_MB // step_mb  # fails at low (0 MB), runs at high
    while high - low > 1:
        middle = (low + high) // 2
        if run_code(PANDAS_SNIPPET, timeout=60, memory_mb=middle * step_mb).ok:
            high = middle
        else:
            low = middle
    return high * step_mb


def run(n_snippets: int = 160, n_sequential: int = 24, rounds: int = 2) -> list[dict]:
    workers = os.cpu_count() or 1
    codes = [SNIPPETS[i % len(SNIPPETS)] for i in range(n_snippets)]

    ours_rates, bare_rates = [], []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(rounds):  # alternate, keep each side's best round
            ours_rate, ours_ok = _throughput(
                lambda cs: [r.ok for r in run_codes(cs, workers=workers)], codes
            )
            bare_rate, bare_ok = _throughput(lambda cs: list(pool.map(_bare_subprocess, cs)), codes)
            if ours_ok != bare_ok:
                raise AssertionError("the sandbox and the bare child disagree on what runs")
            ours_rates.append(ours_rate)
            bare_rates.append(bare_rate)
    ours_rate, bare_rate = max(ours_rates), max(bare_rates)

    cpu_ms = {}
    latency = _interleaved_latency_ms(
        {"ours": run_code, "bare": _bare_subprocess, "minimal": _minimal_subprocess},
        codes[:n_sequential],
        cpu_ms,
    )
    exec_ms = _interleaved_latency_ms({"exec": _in_process}, codes)["exec"]
    ours_ms, bare_ms, minimal_ms = latency["ours"], latency["bare"], latency["minimal"]
    pandas_runs = run_code(PANDAS_SNIPPET, timeout=60).ok
    pandas_latency = _interleaved_latency_ms(
        {"ours": lambda code: run_code(code, timeout=60), "bare": _bare_subprocess}, [PANDAS_SNIPPET] * 5
    )
    pandas_mb = _smallest_memory_for_pandas()
    held, shmem_mb = _held_outside_address_space()
    held_mb = sum(value for name, value in held.items() if isinstance(value, int)) / (1 << 20)
    routes = ", ".join(
        f"{name} {value / (1 << 20):.1f} MB" if isinstance(value, int) else f"{name} {value}"
        for name, value in held.items()
    )
    return [
        {
            "figure": f"code execution throughput, {workers} workers",
            "ours": round(ours_rate, 1),
            "peer": round(bare_rate, 1),
            "ratio": round(ours_rate / bare_rate, 2),
            "unit": "snippets/s",
            "note": "goal >= 20/s on 2 cores; peer: bare `python -c` per snippet, no isolation; "
            f"{sum(ours_ok)}/{len(codes)} snippets run; best of {rounds} alternating rounds",
        },
        {
            "figure": "per-snippet latency, one at a time",
            "ours": round(ours_ms, 1),
            "peer": round(bare_ms, 1),
            "ratio": round(ours_ms / bare_ms, 2),
            "unit": "ms",
            "note": "peer: bare `python -c` (with site-packages, no limits, no hook)",
        },
        {
            "figure": "per-snippet latency against a minimal child",
            "ours": round(ours_ms, 1),
            "peer": round(minimal_ms, 1),
            "ratio": round(ours_ms / minimal_ms, 2),
            "unit": "ms",
            "note": "peer: bare `python -I -S -c`, the same interpreter start-up without the "
            "layers; the difference is what the isolation costs",
        },
        {
            "figure": "CPU time per snippet against a minimal child",
            "ours": round(cpu_ms["ours"], 1),
            "peer": round(cpu_ms["minimal"], 1),
            "ratio": round(cpu_ms["ours"] / cpu_ms["minimal"], 2),
            "unit": "ms",
            "note": "user + system time of this process and its children, the same runs as above; "
            f"2 cores give at most {2000 / cpu_ms['ours']:.0f} snippets/s at this cost",
        },
        {
            "figure": "per-snippet cost of isolation over in-process exec",
            "ours": round(ours_ms, 1),
            "peer": round(exec_ms, 3),
            "ratio": round(ours_ms / exec_ms, 1),
            "unit": "ms",
            "note": "peer: exec() in this process, no isolation at all",
        },
        {
            "figure": "numpy + pandas snippet latency",
            "ours": round(pandas_latency["ours"], 1),
            "peer": round(pandas_latency["bare"], 1),
            "ratio": round(pandas_latency["ours"] / pandas_latency["bare"], 2),
            "unit": "ms",
            "note": "peer: bare `python -c` with site-packages; 5 runs each, interleaved"
            + ("" if pandas_runs else "; the sandbox does not offer pandas: ours is a failure"),
        },
        {
            "figure": "address space a numpy + pandas snippet needs",
            "ours": pandas_mb,
            "peer": MEMORY_LIMIT_MB,
            "ratio": round(pandas_mb / MEMORY_LIMIT_MB, 2) if pandas_mb else None,
            "unit": "MB",
            "note": "smallest memory_mb (10 MB steps) that runs it; peer: the default limit",
        },
        {
            "figure": "memory a hostile snippet holds outside its address-space limit",
            "ours": round(max(held_mb, shmem_mb), 1),
            "peer": MEMORY_LIMIT_MB,
            "ratio": round(max(held_mb, shmem_mb) / MEMORY_LIMIT_MB, 3),
            "unit": "MB",
            "note": f"the larger of what it wrote and the kernel's Shmem rise ({shmem_mb:.1f} MB); {routes}; "
            "peer: memory_mb",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(
            f"{row['figure']}: ours {row['ours']} {row['unit']}, peer {row['peer']} {row['unit']}, "
            f"ratio {row['ratio']} ({row['note']})"
        )
