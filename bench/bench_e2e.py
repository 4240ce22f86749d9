"""End-to-end lm_eval on the shipped demo data with the embedded model: where the time goes.

Runs the harness in-process (``lm_eval.simple_evaluate``) with an ``hf`` model whose
``generate_until`` is timed, so the wall time splits into model generation and everything else
(harness bookkeeping plus our parsing and scoring). Our scoring alone is then timed again by
re-running the tasks' ``process_results`` over the logged samples. The goal: scoring is a small
share of the run.
"""

from __future__ import annotations

import json
import time

from lm_eval_fin.plumbing import paths

# task -> (metadata, gen_kwargs): as `make demo` runs them (fin_ems offline, 384-token answers)
TASKS = {
    "fin_agentbench": ({"data_path": "finagentbench_demo"}, None),
    "fin_ems": (
        {"data_path": "ems_demo", "judge": "none", "bertscore_model": "offline", "max_gen_toks": 384},
        "max_gen_toks=384",
    ),
}


def run() -> list[dict]:
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    model = HFLM(pretrained=str(paths.embedded_model()), device="cpu", dtype="float32", batch_size=4)
    generation_s = 0.0
    generate_until = model.generate_until

    def timed_generate_until(requests, *args, **kwargs):
        nonlocal generation_s
        start = time.perf_counter()
        try:
            return generate_until(requests, *args, **kwargs)
        finally:
            generation_s += time.perf_counter() - start

    model.generate_until = timed_generate_until
    rows = []
    for task, (metadata, gen_kwargs) in TASKS.items():
        generation_s = 0.0
        metadata = dict(metadata, data_path=str(paths.data_path(metadata["data_path"])))
        manager = TaskManager(include_path=str(paths.tasks_dir()), metadata=metadata)
        start = time.perf_counter()
        out = lm_eval.simple_evaluate(
            model=model, tasks=[task], task_manager=manager, apply_chat_template=True, log_samples=True,
            gen_kwargs=gen_kwargs,
        )
        wall_s = time.perf_counter() - start

        scoring_s = 0.0
        for name, samples in out["samples"].items():
            process = manager.load_task_or_group([name])[name].config.process_results
            start = time.perf_counter()
            for sample in samples:
                process(sample["doc"], [sample["resps"][0][0]])
            scoring_s += time.perf_counter() - start
        rows += [
            {"figure": f"{task} demo: wall time (s)", "ours": wall_s, "unit": "s",
             "note": f"{sum(len(s) for s in out['samples'].values())} documents"},
            {"figure": f"{task} demo: model generation (s)", "ours": generation_s, "peer": wall_s,
             "ratio": generation_s / wall_s, "unit": "s", "note": "share of wall time"},
            {"figure": f"{task} demo: our scoring (s)", "ours": scoring_s, "peer": wall_s,
             "ratio": scoring_s / wall_s, "unit": "s", "note": "process_results over all samples; share of wall time"},
            # corpus metrics (EMS, BERTScore) run inside lm-eval's aggregation: this bounds them
            {"figure": f"{task} demo: all but generation (s)", "ours": wall_s - generation_s, "peer": wall_s,
             "ratio": (wall_s - generation_s) / wall_s, "unit": "s",
             "note": "harness bookkeeping + per-document and corpus scoring (model loads included); share of wall time"},
        ]
        print(json.dumps(out["results"], indent=1, default=str)[:2000])
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
