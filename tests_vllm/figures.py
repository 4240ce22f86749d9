"""Figures measured while the vLLM tests run (wall times, engine starts, peak memory), printed
at the end of the session. They are reported, never asserted against a clock."""

from __future__ import annotations

import re

_figures: dict[str, str] = {}

# our backend's log line: "vLLM judge: engine of <model> started in 12.3 s"
JUDGE_ENGINE_STARTED = re.compile(r"vLLM judge: engine of \S+ started in ([\d.]+) s")
# vLLM's own: "init engine (profile, create kv cache, warmup model) took 1.75 s" comes late; the
# harness engine is timed from "Initializing a V1 LLM engine" to the first generate_until line
GIB = 2**30


def record(name: str, value: str) -> None:
    _figures[name] = value


def judge_engine_starts(text: str) -> list[float]:
    return [float(seconds) for seconds in JUDGE_ENGINE_STARTED.findall(text)]


def report() -> list[str]:
    width = max((len(name) for name in _figures), default=0)
    return [f"{name.ljust(width)}  {value}" for name, value in sorted(_figures.items())]
