"""The real lm_eval CLI (through `lm-eval-fin run`), in a subprocess, on a two-example fixture
in the hub schema, with the embedded model as the model under test and as the judge; then the
logged samples re-scored in-process from the judge's cache."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from lm_eval_fin import finlfqa
from lm_eval_fin.judge import load_judge
from lm_eval_fin.textsim import offline_bertscore_model
from tests.finlfqa_fixtures import write_hub_fixture

BIN = Path(sys.executable).parent
METRICS = finlfqa.PER_DOCUMENT_METRICS + finlfqa.CORPUS_METRICS


def test_lm_eval_runs_fin_lfqa_on_a_hub_schema_fixture(tmp_path, embedded_model_dir, embedded_judge_spec, judge_cache):
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    out = tmp_path / "out"
    env = {key: value for key, value in os.environ.items() if key != "LM_EVAL_FIN_JUDGE"}
    # One OpenMP thread: on a small shared machine, threads of a 135M model spin against each other.
    env["OMP_NUM_THREADS"] = "1"
    # A short judge reply: the 135M judge rambles to the limit, and the parser only needs a few tokens.
    metadata = {
        "data_path": str(data), "bertscore_model": offline_bertscore_model(),
        "judge": embedded_judge_spec, "judge_max_tokens": 24,
    }
    run = subprocess.run(
        [
            BIN / "lm-eval-fin", "run",
            "--model", "hf",
            "--model_args", f"pretrained={embedded_model_dir},dtype=float32",
            "--apply_chat_template",
            "--tasks", "fin_lfqa",
            "--confirm_run_unsafe_code",
            "--metadata", json.dumps(metadata),
            "--limit", "2",
            "--gen_kwargs", "max_gen_toks=32",
            "--output_path", str(out),
            "--log_samples",
        ],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["fin_lfqa"]
    for metric in METRICS:
        assert f"{metric},none" in results, metric
    for metric in ("numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l", "code_exec_rate",
                   "bertscore_f1", "parse_failure", "judge_parse_failure"):
        assert 0.0 <= results[f"{metric},none"] <= 1.0, metric
    assert results["judge_skipped,none"] == 0.0
    judge_score = results["judge_score,none"]
    assert math.isnan(judge_score) or 3.0 <= judge_score <= 15.0
    assert "FinLFQA judge hf:" in run.stderr  # the batch summary

    # Re-scoring the logged samples reads every judge answer from the cache the run filled.
    samples = [json.loads(line) for line in next(out.rglob("samples_fin_lfqa_*.jsonl")).read_text().splitlines()]
    assert len(samples) == 2
    judge = load_judge(embedded_judge_spec)
    metrics, details = finlfqa.rescore(samples, judge)
    assert judge.stats.model_calls == 0 and judge.stats.cache_hits >= 2
    assert len(details) == 2
    for name in ("judge_score", "judge_parse_failure"):
        assert metrics[name] == results[f"{name},none"] or (math.isnan(metrics[name]) and math.isnan(results[f"{name},none"]))
