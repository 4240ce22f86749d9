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

# Shorter answers than the tasks' budgets keep the demo within a few minutes on 2 cores.
DEMO_ANSWER_TOKENS = {"fin_ems": 384, "fin_lfqa": 384}
# The figures the summary shows for each task (the results files hold them all).
HEADLINES = {
    "fin_agentbench_doc": ("ndcg@5", "map@5", "map_hits@5", "mrr@5", "parse_failure"),
    "fin_agentbench_chunk": ("ndcg@10", "map@10", "map_hits@10", "mrr@10", "parse_failure"),
    "fin_ems": ("ems_offline_bertscore_f1", "ems_offline_rouge_f1", "rouge_l_f1", "bertscore_f1"),
    "fin_lfqa": ("numeric_f1", "evidence_f1", "code_exec_rate", "rouge_l", "parse_failure"),
}
NOTES = {
    "fin_agentbench_chunk": "a 135M model seldom writes an index list for a 12-chunk prompt: its parse failures "
    "are real, not a bug (try a larger model, e.g. with --model vllm)",
}


def demo_runs(output_path: str, limit: int | None) -> dict[str, list[str]]:
    """Benchmark -> lm-eval arguments of its demo run."""
    model = ["--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
             "--apply_chat_template", "--batch_size", "1"]
    metadata = {
        "fin_agentbench": {"data_path": str(paths.data_path("finagentbench_demo"))},
        "fin_ems": {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
                    "max_gen_toks": DEMO_ANSWER_TOKENS["fin_ems"]},
        "fin_lfqa": {"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), "judge": "none",
                     "bertscore_model": "offline"},
    }
    extra = {
        "fin_ems": ["--gen_kwargs", f"max_gen_toks={DEMO_ANSWER_TOKENS['fin_ems']}"],
        "fin_lfqa": ["--gen_kwargs", f"max_gen_toks={DEMO_ANSWER_TOKENS['fin_lfqa']}", "--confirm_run_unsafe_code"],
    }
    runs = {}
    for benchmark, task_metadata in metadata.items():
        argv = [*model, "--tasks", benchmark, "--metadata", json.dumps(task_metadata), *extra.get(benchmark, []),
                "--output_path", str(Path(output_path) / benchmark), "--log_samples"]
        if limit:
            argv += ["--limit", str(limit)]
        runs[benchmark] = argv
    return runs


def latest_results(folder: Path) -> dict:
    """The newest results file lm-eval wrote under ``folder``."""
    found = sorted(folder.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    return json.loads(found[-1].read_text(encoding="utf-8")) if found else {}


def summary(output_path: Path, seconds: dict[str, float]) -> str:
    """What ran, how long, the headline figures and where the files are."""
    lines = ["", "lm-eval-fin demo: SmolLM2-135M-Instruct (embedded) on the shipped synthetic samples, CPU, offline"]
    for benchmark, took in seconds.items():
        folder = output_path / benchmark
        results = latest_results(folder).get("results", {})
        lines.append(f"  {benchmark}: {took:.0f} s, results and samples in {folder}")
        for task, figures in results.items():
            shown = [f"{name} {figures[f'{name},none']:.3f}" for name in HEADLINES.get(task, ())
                     if isinstance(figures.get(f"{name},none"), (int, float))]
            if shown:
                lines.append(f"    {task}: " + ", ".join(shown))
            if task in NOTES:
                lines.append(f"      note: {NOTES[task]}")
    lines.append(f"  total {sum(seconds.values()):.0f} s; everything is under {output_path}")
    return "\n".join(lines)


def run_demo(output_path: str, limit: int | None, benchmarks: Sequence[Benchmark]) -> int:
    seconds = {}
    for benchmark, argv in demo_runs(output_path, limit).items():
        started = time.perf_counter()
        status = run_harness(argv, benchmarks)  # lm-eval raises on failure, which stops the demo
        seconds[benchmark] = time.perf_counter() - started
        if status:
            return status
    from lm_eval_fin.report import write_report

    page = write_report([Path(output_path) / benchmark for benchmark in seconds], Path(output_path) / "report")
    print(summary(Path(output_path), seconds))
    print(f"  report: {page} (open it in a browser; leaderboard.md and leaderboard.csv beside it)")
    return 0
