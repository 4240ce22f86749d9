"""``make demo`` / ``lm-eval-fin demo``: every benchmark on its shipped sample, offline.

The embedded model (SmolLM2-135M-Instruct on CPU) answers; fin_ems is scored by the offline
EMS (no judge) and fin_lfqa without its judge, both with the packaged MiniLM as BERTScore
model. One harness run per benchmark (each reads its own ``data_path``), each saving its
results and samples under ``<output_path>/<benchmark>/``; the demo ends with a summary (what
ran, how long, the headline figures, where everything is) and the report of the three runs
(``lm-eval-fin report``: one HTML page with every answer, a Markdown and a CSV leaderboard)
under ``<output_path>/report/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from lm_eval_fin import paths
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.run import run_harness


def demo_runs(output_path: str, limit: int | None, benchmarks: Sequence[Benchmark]) -> dict[str, list[str]]:
    """Benchmark -> lm-eval arguments of its demo run."""
    model = ["--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
             "--apply_chat_template", "--batch_size", "1"]
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


def run_demo(output_path: str, limit: int | None, benchmarks: Sequence[Benchmark]) -> int:
    seconds = {}
    for benchmark, argv in demo_runs(output_path, limit, benchmarks).items():
        started = time.perf_counter()
        status = run_harness(argv, benchmarks)  # lm-eval raises on failure, which stops the demo
        seconds[benchmark] = time.perf_counter() - started
        if status:
            return status
    from lm_eval_fin.report import write_report

    page = write_report([Path(output_path) / benchmark for benchmark in seconds], Path(output_path) / "report",
                        benchmarks=benchmarks)
    print(summary(Path(output_path), seconds, benchmarks))
    print(f"  report: {page} (open it in a browser; leaderboard.md and leaderboard.csv beside it)")
    return 0
