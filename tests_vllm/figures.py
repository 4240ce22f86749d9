"""Figures measured while the vLLM tests run (wall times, engine starts, peak memory), printed
at the end of the session. They are reported, never asserted against a clock."""

from __future__ import annotations

import re

_figures: dict[str, str] = {}

# our backend's log line: "vLLM judge: engine of <model> started in 12.3 s"
JUDGE_ENGINE_STARTED = re.compile(r"vLLM judge: engine of \S+ started in ([\d.]+) s")
# vLLM's own log lines (timestamps to the second) around an engine's start: its first line,
# and the last one, "init engine (profile, create kv cache, warmup model) took 1.75 s"
VLLM_LOG_TIME = r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+\] "
ENGINE_INITIALISING = re.compile(VLLM_LOG_TIME + "Initializing a V1 LLM engine")
ENGINE_READY = re.compile(VLLM_LOG_TIME + r"init engine \(profile, create kv cache, warmup model\) took")


def record(name: str, value: str) -> None:
    _figures[name] = value


def judge_engine_starts(text: str) -> list[float]:
    return [float(seconds) for seconds in JUDGE_ENGINE_STARTED.findall(text)]


def engine_starts(text: str) -> list[float]:
    """Seconds from each engine's first log line to its "init engine ... took" line (vLLM's
    log, to the second): the engine of the model under test and, in a run with a vllm judge,
    the judge's."""
    def seconds(stamp: str) -> int:
        day, clock = stamp.split(" ")
        hours, minutes, secs = map(int, clock.split(":"))
        return int(day.split("-")[1]) * 86400 + hours * 3600 + minutes * 60 + secs

    begun = [seconds(m.group(1)) for m in ENGINE_INITIALISING.finditer(text)]
    ready = [seconds(m.group(1)) for m in ENGINE_READY.finditer(text)]
    return [float(end - start) for start, end in zip(begun, ready)]


def report() -> list[str]:
    width = max((len(name) for name in _figures), default=0)
    return [f"{name.ljust(width)}  {value}" for name, value in sorted(_figures.items())]


# what the judge logs (lm_eval_fin.judge at INFO): an engine start, and each batch's summary
STARTING = "vLLM judge: starting an engine"


def model_calls_logged(text: str) -> list[int]:
    """The model calls of every judge batch summary logged."""
    return [int(n) for n in re.findall(r"(\d+) model calls", text)]
