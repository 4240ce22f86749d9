"""The real lm_eval CLI (through `lm-eval-fin run`), in a subprocess, on a two-example fixture
in the hub schema, with the embedded model as the model under test and as the judge; then the
logged answers scored again by `lm-eval-fin score`, every verdict from the judge's cache.
Per-answer details (the judge's reply, the steps of the multi-step settings) are read from each
sample's scored-answer record."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.measures.textsim import offline_bertscore_model
from lm_eval_fin.outputs import records
from tests.finlfqa_fixtures import write_hub_fixture
from tests.logged_runs import read_task_run
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
METRICS = taskfiles.metric_names("fin_lfqa")
JUDGE_BATCH = re.compile(r"FinLFQA judge \[hf:[^\]]*\]: (\d+) requests, (\d+) cache hits, (\d+) model calls")


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
    run_, lines = read_task_run(out, "fin_lfqa")
    results = {name: metric.value for name, metric in run_.tasks["fin_lfqa"].metrics.items()}
    # a reply the 135M judge left unreadable is no score, and the run says so in its exit status
    unreadable = results["judge_parse_failure"] > 0
    assert run.returncode == (1 if unreadable else 0), run.stderr[-4000:]
    assert ("answered unreadably" in run.stderr) is unreadable
    # every metric the run defines is listed; code_* are defined only for answers with code, the
    # judge's scores only for answers it gave a verdict
    undefinable = {m for m in METRICS if m.startswith("code_")} | {"judge_score", "judge_accuracy", "judge_numerical",
                                                                    "judge_entailment"}
    assert set(results) <= set(METRICS) and set(METRICS) - set(results) <= undefinable
    for metric in ("numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l", "bertscore_f1", "parse_failure",
                   "judge_parse_failure"):
        assert 0.0 <= results[metric] <= 1.0, metric
    # 32 tokens seldom hold a code block: the rate is over the answers that have one, else absent
    assert results.get("code_exec_rate") is None or 0.0 <= results["code_exec_rate"] <= 1.0
    # the second example's reference cites no knowledge: left out of knowledge_recall, counted
    assert results["knowledge_skipped"] == 1.0 and [line.get("knowledge_recall") is None for line in lines] == [False, True]
    # the fixture cites index 0: 0-based, detected from the data and reported
    assert results["index_base"] == 0.0
    assert results["judge_skipped"] == 0.0
    assert results.get("judge_score") is None or 3.0 <= results["judge_score"] <= 15.0
    for line in lines:  # each answer's verdict, or why there is none, in its record
        verdict = records.decode(line["filtered_resps"])["judge"]
        assert verdict["spec"] == embedded_judge_spec and verdict["error"] is None
        assert (verdict["scores"] is None) == (line.get("judge_score") is None) == (line["judge_parse_failure"] == 1.0)
        if verdict["scores"] is not None:
            assert line["judge_score"] == sum(verdict["scores"].values())
    ((requests, _, calls),) = JUDGE_BATCH.findall(run.stderr)[:1]
    assert int(requests) == 2 and int(calls) > 0  # the batch summary

    # `score` replays the logged answers: every judge answer from the cache the run filled, the
    # model never loaded, the same values, and the same exit status
    score = subprocess.run(
        [BIN / "lm-eval-fin", "score", out, "--judge", embedded_judge_spec, "--judge-retry-unparsable", "no",
         "--confirm_run_unsafe_code"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1800,
    )
    assert score.returncode == run.returncode, score.stderr[-4000:]
    assert all(int(calls) == 0 for _, _, calls in JUDGE_BATCH.findall(score.stderr))
    assert JUDGE_BATCH.findall(score.stderr)[0][1] == "2"  # both first asks from the cache
    scored, scored_lines = read_task_run(out, "fin_lfqa", model="fin-replay")
    assert scored.date != run_.date
    for line, scored_line in zip(lines, scored_lines):
        assert scored_line["resps"] == line["resps"]
        assert {name: scored_line.get(name) for name in METRICS} == {name: line.get(name) for name in METRICS}


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
                "--output_path", str(tmp_path / "out"), "--log_samples",
            ],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        stats = server.stats()
    assert stats["calls"] == 2
    assert {(body["model"], body["seed"]) for body in stats["bodies"]} == {("judge-model", 5)}
    run_, lines = read_task_run(tmp_path / "out", "fin_lfqa")
    results = run_.tasks["fin_lfqa"].metrics
    assert results["judge_score"].value == 4.0 and [line["judge_score"] for line in lines] == [4.0, 4.0]
    assert (results["judge_failure"].value, results["judge_skipped"].value) == (0.0, 0.0)
    assert [records.decode(line["filtered_resps"])["answer"] for line in lines] == ["lol", "lol"]  # the dummy's


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
            "--tasks", "fin_lfqa-posthoc,fin_lfqa-iterative",
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
    traces = {}
    for name in ("fin_lfqa-posthoc", "fin_lfqa-iterative"):
        run_, (line,) = read_task_run(out, name)
        assert set(run_.tasks[name].metrics) <= set(taskfiles.metric_names(name))
        assert 0.0 <= line["bertscore_f1"] <= 1.0  # "offline" reaches BERTScore
        traces[name] = (records.decode(line["filtered_resps"])["trace"], line)
    posthoc, _ = traces["fin_lfqa-posthoc"]
    refined, line = traces["fin_lfqa-iterative"]
    assert line["refine_rounds"] == 1.0 and line["refine_done"] == float(refined["done"])
    # every step of each example, in its record
    assert [s["step"] for s in posthoc["steps"]] == ["answer", "attribution"]
    expected = ["answer", "feedback"] if refined["done"] else ["answer", "feedback", "revision"]
    assert [s["step"] for s in refined["steps"]] == expected and refined["rounds"] == 1
    # the logged answer is the final one: after a revision, the revision's text
    final = refined["steps"][-1]["reply"] if not refined["done"] and refined["steps"][-1]["reply"].strip() else (
        refined["steps"][0]["reply"])
    assert line["resps"][0][0] == final
    assert not list(out.rglob("*-steps-*")) and {p.suffix for p in out.rglob("*") if p.is_file()} == {".json", ".jsonl"}


def test_the_multistep_settings_refuse_a_plain_model(tmp_path):
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    run = subprocess.run(
        [BIN / "lm-eval-fin", "run", "--model", "dummy", "--tasks", "fin_lfqa-posthoc", "--confirm_run_unsafe_code",
         "--metadata", json.dumps({"data_path": str(data), "judge": "none", "bertscore_model": "offline"})],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert run.returncode != 0 and "--model fin-refine --model_args base=" in run.stderr
