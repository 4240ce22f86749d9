"""The judge budget of a judged fin_ems run through lm-eval's filter stage, against the bare EMS
pass on the same answers (the pass lm-eval's aggregation step ran before issue 21).

Both send their requests through the real judge layer (CachedJudge with a fresh sqlite cache)
to the scripted EMS judge of ``tests/ems_scripted_judge.py`` behind the real OpenAI-compatible
test server on loopback. Figures: judge batches (``complete`` calls: the rounds plus any
re-asks) and requests of one run of 20 documents; then the same stage run again on the warm
cache, whose model calls must be 0.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

N_DOCS = 20
ROOT = Path(__file__).resolve().parents[1]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counting(judge) -> list[int]:
    """Count the judge's batches (each ``complete`` call) in the list returned."""
    batches: list[int] = []
    complete = judge.complete

    def counted(requests, desc="judge"):
        batches.append(len(requests))
        return complete(requests, desc=desc)

    judge.complete = counted
    return batches


def run() -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from lm_eval_fin.benchmarks.fin_ems.task import BENCHMARK
    from lm_eval_fin.ems import run_ems
    from lm_eval_fin.harness import stage
    from lm_eval_fin.judge import load_judge
    from lm_eval_fin.measures import textsim
    from tests.ems_scripted_judge import ScriptedJudgeServer

    answers, references = _module("bench_ems_pairs", ROOT / "bench" / "bench_ems.py").make_pairs()
    answers, references = answers[:N_DOCS], references[:N_DOCS]
    with tempfile.TemporaryDirectory() as folder, ScriptedJudgeServer() as server:
        os.environ["LM_EVAL_FIN_CACHE"] = str(Path(folder) / "stage.sqlite")
        settings = BENCHMARK.read_settings("fin_ems", {"judge": server.spec, "bertscore_model": "offline"})
        docs = [{"id": f"d{i}", "reference": reference, "question": "q", "transcript": "t", "company": "",
                 "ticker": "", "call_date": "", "settings": settings.to_json()}
                for i, reference in enumerate(references)]
        judge = stage.judge_for(settings)
        batches = _counting(judge)
        apply = BENCHMARK.filter_function()
        apply([[answer] for answer in answers], docs)
        cold = dict(batches=len(batches), requests=judge.stats.requests, calls=judge.stats.model_calls)
        apply([[answer] for answer in answers], docs)
        warm_calls = judge.stats.model_calls - cold["calls"]
        stage.close_judges()

        os.environ["LM_EVAL_FIN_CACHE"] = str(Path(folder) / "bare.sqlite")
        bare = load_judge(server.spec)
        bare_batches = _counting(bare)
        run_ems(answers, references, judge=bare, bertscore_model=textsim.offline_bertscore_model())
        bare_requests = bare.stats.requests
        bare.close()
    return [
        {
            "figure": f"fin_ems judged run through the filter stage, {N_DOCS} documents (judge batches)",
            "ours": cold["batches"], "peer": len(bare_batches), "ratio": cold["batches"] / len(bare_batches),
            "unit": "batches",
            "note": f"peer: the bare EMS pass (what the aggregation step ran before); requests {cold['requests']} vs "
            f"{bare_requests}; scripted judge over loopback",
        },
        {
            "figure": "fin_ems filter stage run again on the warm judge cache (model calls)",
            "ours": warm_calls, "peer": 0, "ratio": None, "unit": "calls", "note": "goal: 0",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
