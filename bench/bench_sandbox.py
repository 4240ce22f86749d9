"""Sandbox throughput and per-snippet overhead, against peers measured in the same run.

Ours: lm_eval_fin.sandbox with every layer on (fresh ``python -I -S`` child per snippet,
limits, unprivileged user when root, audit hook, session kill, temp dir removed).
Peers: a bare ``subprocess.run([sys.executable, "-c", driver])`` per snippet with no
isolation at all (what a naive scorer would do), the same with ``-I -S`` (our interpreter
start-up without our layers), and ``exec`` in this process.

The snippets are FinLFQA-like: mostly small calculations, plus the paper's common failures
(parameters, no return, indentation). Goal: at least 20 snippets/s on 2 cores.

    python bench/bench_sandbox.py
"""

from __future__ import annotations

import os
import subprocess
import sys
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
        timeout=5,
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
    except Exception:
        return False


def _throughput(run_all, codes) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    oks = run_all(codes)
    return len(codes) / (time.perf_counter() - started), oks


def _interleaved_latency_ms(runners: dict, codes) -> dict[str, float]:
    """Mean milliseconds per snippet for each runner, taking turns snippet by snippet so that
    all of them see the same load on a shared machine."""
    totals = dict.fromkeys(runners, 0.0)
    for code in codes:
        for name, run_one in runners.items():
            started = time.perf_counter()
            run_one(code)
            totals[name] += time.perf_counter() - started
    return {name: total / len(codes) * 1000 for name, total in totals.items()}


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

    latency = _interleaved_latency_ms(
        {"ours": run_code, "bare": _bare_subprocess, "minimal": _minimal_subprocess},
        codes[:n_sequential],
    )
    exec_ms = _interleaved_latency_ms({"exec": _in_process}, codes)["exec"]
    ours_ms, bare_ms, minimal_ms = latency["ours"], latency["bare"], latency["minimal"]
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
            "figure": "per-snippet cost of isolation over in-process exec",
            "ours": round(ours_ms, 1),
            "peer": round(exec_ms, 3),
            "ratio": round(ours_ms / exec_ms, 1),
            "unit": "ms",
            "note": "peer: exec() in this process, no isolation at all",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(
            f"{row['figure']}: ours {row['ours']} {row['unit']}, peer {row['peer']} {row['unit']}, "
            f"ratio {row['ratio']} ({row['note']})"
        )
