"""``make demo`` / ``lm-eval-fin demo``: every benchmark on its shipped sample, offline.

The embedded model (SmolLM2-135M-Instruct on CPU) answers; fin_ems is scored by the offline
EMS (no judge) and fin_lfqa without its judge, both with the packaged MiniLM as BERTScore
model. One harness run per benchmark (each reads its own ``data_path``), each saving its
results and samples under ``<output_path>/<benchmark>/``; the demo ends with a summary (what
ran, how long, the headline figures, where everything is) and the report of the three runs
(``lm-eval-fin report``: one HTML page with every answer, a Markdown and a CSV leaderboard)
under ``<output_path>/report/``.

Its first line says how long it takes; a line per benchmark says when each starts and ends.
The model, BERTScore and the code sandbox run with the threads this machine can give them
(:func:`set_threads`): a small model generating one token at a time runs many short parallel
regions, each waiting for its slowest thread, so on a shared, loaded machine a second thread
that has to wait for its core costs more than it brings.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.run import run_harness
from lm_eval_fin.plumbing import cpus, paths

# Seconds of `make demo` on 2 cores (the environment installed): what the first line promises.
# 199 s at load averages 5.4 falling to 1.8 on 2 CPUs (one thread, batches of 4; bench/RESULTS.md).
QUIET_SECONDS = 180
# Answers generated at once: 4 documents in a batch took 0.57 of the time each one alone took
# (bench/bench_demo_threads.py --batch 4), and no task of the demo has more than 6.
DEMO_BATCH = 4
# The thread pools the demo's work uses: torch's (OpenMP, MKL), OpenBLAS's (numpy in the sandbox)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def demo_threads(environ: Mapping[str, str]) -> int:
    """The threads of the demo's model and BERTScore: ``$OMP_NUM_THREADS`` where the user set
    it, else the CPUs the machine's load leaves free (:func:`lm_eval_fin.plumbing.cpus.compute_threads`,
    which also bounds the sandbox's workers)."""
    given = environ.get("OMP_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else cpus.compute_threads()


def set_threads() -> int:
    """Set :func:`demo_threads` for this process (before torch loads, or through torch where it
    has); the tokenizers stay single-threaded."""
    threads = demo_threads(os.environ)
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if "torch" in sys.modules:  # imported already: OpenMP read the variable at that point
        sys.modules["torch"].set_num_threads(threads)
    return threads


def first_line(benchmarks: Sequence[str], threads: int) -> str:
    """What the demo runs and how long it takes, with the machine's load where it is busy."""
    usable, load = cpus.usable_cpus(), cpus.load_average()
    busy = f"; this machine's load is {load:.1f} on {usable} CPUs, so expect longer" if load >= 1 else ""
    return (f"lm-eval-fin demo: {', '.join(benchmarks)} on their shipped samples with SmolLM2-135M-Instruct on CPU "
            f"({threads} thread{'s' if threads > 1 else ''}), offline; about {round(QUIET_SECONDS / 60)} minutes on "
            f"2 quiet cores{busy}")


def demo_runs(output_path: str, limit: int | None, benchmarks: Sequence[Benchmark]) -> dict[str, list[str]]:
    """Benchmark -> lm-eval arguments of its demo run."""
    model = ["--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
             "--apply_chat_template", "--batch_size", str(DEMO_BATCH)]
    runs = {}
    for benchmark in benchmarks:
        if benchmark.demo is None:
            continue
        argv = [*model, "--tasks", benchmark.name, "--metadata", json.dumps(benchmark.demo.metadata()),
                *benchmark.demo.arguments, "--output_path", str(Path(output_path) / benchmark.name), "--log_samples"]
        if limit:
            argv += ["--limit", str(limit)]
        runs[benchmark.name] = argv
    return runs


def latest_results(folder: Path) -> dict:
    """The newest results file lm-eval wrote under ``folder``."""
    found = sorted(folder.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    return json.loads(found[-1].read_text(encoding="utf-8")) if found else {}


def summary(output_path: Path, seconds: dict[str, float], benchmarks: Sequence[Benchmark]) -> str:
    """What ran, how long, the headline figures and where the files are."""
    headlines = {task: names for b in benchmarks for task, names in b.headline.items()}
    notes = {task: note for b in benchmarks if b.demo for task, note in b.demo.notes.items()}
    lines = ["", "lm-eval-fin demo: SmolLM2-135M-Instruct (embedded) on the shipped synthetic samples, CPU, offline"]
    for benchmark, took in seconds.items():
        folder = output_path / benchmark
        results = latest_results(folder).get("results", {})
        lines.append(f"  {benchmark}: {took:.0f} s, results and samples in {folder}")
        for task, figures in results.items():
            shown = [f"{name} {figures[f'{name},none']:.3f}" for name in headlines.get(task, ())
                     if isinstance(figures.get(f"{name},none"), (int, float))]
            if shown:
                lines.append(f"    {task}: " + ", ".join(shown))
            if task in notes:
                lines.append(f"      note: {notes[task]}")
    lines.append(f"  total {sum(seconds.values()):.0f} s; everything is under {output_path}")
    return "\n".join(lines)


def progress(line: str) -> None:
    print(line, flush=True)  # between lm-eval's own log lines, on stdout


def run_demo(output_path: str, limit: int | None, benchmarks: Sequence[Benchmark]) -> int:
    runs = demo_runs(output_path, limit, benchmarks)
    progress(first_line(list(runs), set_threads()))
    seconds = {}
    started_all = time.perf_counter()
    for number, (benchmark, argv) in enumerate(runs.items(), 1):
        progress(f"[{number}/{len(runs)}] {benchmark}: running ({time.perf_counter() - started_all:.0f} s so far)")
        started = time.perf_counter()
        status = run_harness(argv, benchmarks)  # lm-eval raises on failure, which stops the demo
        seconds[benchmark] = time.perf_counter() - started
        progress(f"[{number}/{len(runs)}] {benchmark}: done in {seconds[benchmark]:.0f} s")
        if status:
            return status
    from lm_eval_fin.report import write_report

    page = write_report([Path(output_path) / benchmark for benchmark in seconds], Path(output_path) / "report",
                        benchmarks=benchmarks)
    print(summary(Path(output_path), seconds, benchmarks))
    print(f"  report: {page} (open it in a browser; leaderboard.md and leaderboard.csv beside it)")
    return 0
