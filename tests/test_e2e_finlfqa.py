"""The real lm_eval CLI (through `lm-eval-fin run`), in a subprocess, on a two-example fixture
in the hub schema, with the embedded model as the model under test and as the judge; then the
logged samples re-scored in-process from the judge's cache."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from lm_eval_fin.benchmarks.fin_lfqa import task
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.judge import JudgeOptions, load_judge
from lm_eval_fin.textsim import offline_bertscore_model
from tests.finlfqa_fixtures import write_hub_fixture
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
METRICS = tuple(taskfiles.higher_is_better("fin_lfqa"))


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
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1800,  # a shared 2-core machine
    )
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["fin_lfqa"]
    # a reply the 135M judge left unreadable is no score, and the run says so in its exit status
    unreadable = results["judge_parse_failure,none"] > 0
    assert run.returncode == (1 if unreadable else 0), run.stderr[-4000:]
    assert ("answered unreadably" in run.stderr) is unreadable
    for metric in METRICS:
        assert f"{metric},none" in results, metric
    for metric in ("numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l", "code_exec_rate",
                   "bertscore_f1", "parse_failure", "judge_parse_failure"):
        assert 0.0 <= results[f"{metric},none"] <= 1.0, metric
    # the second example's reference cites no knowledge: left out of knowledge_recall, counted
    assert results["knowledge_skipped,none"] == 1.0
    # the fixture cites index 0: 0-based, detected from the data and reported
    assert results["index_base,none"] == 0.0
    assert results["judge_skipped,none"] == 0.0
    judge_score = results["judge_score,none"]
    assert math.isnan(judge_score) or 3.0 <= judge_score <= 15.0
    assert "FinLFQA judge [hf:" in run.stderr  # the batch summary

    # Re-scoring the logged samples reads every judge answer from the cache the run filled.
    samples = [json.loads(line) for line in next(out.rglob("samples_fin_lfqa_*.jsonl")).read_text().splitlines()]
    assert len(samples) == 2
    judge = load_judge(embedded_judge_spec, JudgeOptions(retry_unparsable=False))
    metrics, details = task.rescore(samples, judge)
    assert judge.stats.model_calls == 0 and judge.stats.cache_hits >= 2
    assert len(details) == 2
    for name in ("judge_score", "judge_parse_failure"):
        assert metrics[name] == results[f"{name},none"] or (math.isnan(metrics[name]) and math.isnan(results[f"{name},none"]))


def test_run_hands_its_judge_flags_to_the_harness(tmp_path, judge_cache):
    """`lm-eval-fin run --judge SPEC --judge_seed 5`: lm-eval's own CLI (its dummy model, which
    answers "lol") scores fin_lfqa with the judge and the options named on our command line."""
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    env = {key: value for key, value in os.environ.items() if not key.startswith("LM_EVAL_FIN_JUDGE")}
    env["OMP_NUM_THREADS"] = "1"
    verdict = json.dumps({"accuracy": 2, "numerical_correctness": 1, "evidence_entailment": 1})
    with ServerProcess(reply=verdict) as server:
        run = subprocess.run(
            [
                BIN / "lm-eval-fin", "run", "--model", "dummy", "--tasks", "fin_lfqa",
                "--judge", f"openai:{server.base_url}#judge-model", "--judge_seed", "5",
                "--confirm_run_unsafe_code",
                "--metadata", json.dumps({"data_path": str(data), "bertscore_model": "offline"}),
                "--output_path", str(tmp_path / "out"),
            ],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        stats = server.stats()
    assert stats["calls"] == 2
    assert {(body["model"], body["seed"]) for body in stats["bodies"]} == {("judge-model", 5)}
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())["results"]["fin_lfqa"]
    assert results["judge_score,none"] == 4.0
    assert (results["judge_failure,none"], results["judge_skipped,none"]) == (0.0, 0.0)


def test_lm_eval_fin_run_runs_the_posthoc_and_iterative_settings(tmp_path, embedded_model_dir):
    """`--model fin-refine --model_args base=hf,...`: the wrapper runs each setting's steps with
    the embedded model (one example, one refinement round, short replies)."""
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    out = tmp_path / "out"
    env = {key: value for key, value in os.environ.items() if not key.startswith("LM_EVAL_FIN_")}
    env["OMP_NUM_THREADS"] = "1"
    metadata = {"data_path": str(data), "bertscore_model": "offline", "judge": "none", "max_rounds": 1}
    run = subprocess.run(
        [
            BIN / "lm-eval-fin", "run",
            "--model", "fin-refine",
            "--model_args", f"base=hf,pretrained={embedded_model_dir},dtype=float32",
            "--apply_chat_template",
            "--tasks", "fin_lfqa_posthoc,fin_lfqa_iterative",
            "--confirm_run_unsafe_code",
            "--metadata", json.dumps(metadata),
            "--limit", "1",
            "--gen_kwargs", "max_gen_toks=24",
            "--output_path", str(out),
            "--log_samples",
        ],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    for name in ("fin_lfqa_posthoc", "fin_lfqa_iterative"):
        for metric in taskfiles.higher_is_better(name):
            assert f"{metric},none" in results[name], (name, metric)
        assert 0.0 <= results[name]["bertscore_f1,none"] <= 1.0  # "offline" reaches BERTScore
    iterative = results["fin_lfqa_iterative"]
    assert iterative["refine_rounds,none"] == 1.0 and iterative["refine_done,none"] in (0.0, 1.0)
    # every step of each example, in the details folder beside lm-eval's output
    steps = {path.name.split("-steps-")[0]: json.loads(path.read_text()) for path in out.rglob("*-steps-*.json")}
    assert [s["step"] for s in steps["fin_lfqa_posthoc"][0]["steps"]] == ["answer", "attribution"]
    refined = steps["fin_lfqa_iterative"][0]
    expected = ["answer", "feedback"] if refined["done"] else ["answer", "feedback", "revision"]
    assert [s["step"] for s in refined["steps"]] == expected and refined["rounds"] == 1
    # the logged answer is the final one: after a revision, the revision's text
    samples = json.loads(next(out.rglob("samples_fin_lfqa_iterative_*.jsonl")).read_text().splitlines()[0])
    final = refined["steps"][-1]["reply"] if not refined["done"] and refined["steps"][-1]["reply"].strip() else (
        refined["steps"][0]["reply"])
    assert samples["resps"][0][0] == final


def test_the_multistep_settings_refuse_a_plain_model(tmp_path):
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    run = subprocess.run(
        [BIN / "lm-eval-fin", "run", "--model", "dummy", "--tasks", "fin_lfqa_posthoc", "--confirm_run_unsafe_code",
         "--metadata", json.dumps({"data_path": str(data), "judge": "none", "bertscore_model": "offline"})],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert run.returncode != 0 and "--model fin-refine --model_args base=" in run.stderr
