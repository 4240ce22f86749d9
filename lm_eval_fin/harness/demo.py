"""``make demo`` / ``lm-eval-fin demo``: every benchmark on its shipped sample, offline.

The embedded model (SmolLM2-135M-Instruct on CPU) answers; fin_ems is scored by the offline
EMS (no judge) with the packaged MiniLM as BERTScore model. One harness run per benchmark,
since each reads its own ``data_path``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lm_eval_fin import paths
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.run import run_harness

# shorter answers than the task's 1024 tokens keep the demo within a few minutes on 2 cores
DEMO_EMS_ANSWER_TOKENS = 384


def demo_runs(output_path: str | None, limit: int | None) -> list[list[str]]:
    """lm-eval arguments of the demo's runs."""
    model = ["--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
             "--apply_chat_template", "--batch_size", "4"]
    metadata = {
        "fin_agentbench": {"data_path": str(paths.data_path("finagentbench_demo"))},
        "fin_ems": {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
                    "max_gen_toks": DEMO_EMS_ANSWER_TOKENS},
    }
    gen_kwargs = {"fin_ems": ["--gen_kwargs", f"max_gen_toks={DEMO_EMS_ANSWER_TOKENS}"]}
    runs = []
    for task, task_metadata in metadata.items():
        argv = [*model, "--tasks", task, "--metadata", json.dumps(task_metadata), *gen_kwargs.get(task, [])]
        if output_path:
            argv += ["--output_path", str(Path(output_path) / task), "--log_samples"]
        if limit:
            argv += ["--limit", str(limit)]
        runs.append(argv)
    return runs


def run_demo(output_path: str | None, limit: int | None, benchmarks: Sequence[Benchmark]) -> int:
    for argv in demo_runs(output_path, limit):
        status = run_harness(argv, benchmarks)  # lm-eval raises on failure, which stops the demo
        if status:
            return status
    return 0
