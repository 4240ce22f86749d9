"""fin_ems through the real CLIs (subprocesses) on the shipped synthetic demo, with the
embedded model under test: ``lm_eval`` with the embedded model as the EMS judge and offline,
and ``lm-eval-fin run`` with a scripted judge behind the real OpenAI-compatible test server,
which prints every column of the EMS paper's Table 1. The later runs reuse the first's
generations through lm-eval's response cache."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin import paths
from lm_eval_fin.benchmarks.fin_ems.prompt import TRUNCATION_MARK
from tests.ems_scripted_judge import ScriptedJudgeServer

BIN = Path(sys.executable).parent
MAX_LENGTH, MAX_GEN_TOKS = 480, 16  # small enough that the demo transcripts must be cut


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fin_ems_e2e")


def run_fin_ems(workdir, model_dir, name, judge, extra_metadata, command=("lm_eval", "run")):
    out = workdir / name
    metadata = {
        "data_path": str(paths.data_path("ems_demo")),
        "bertscore_model": "offline",
        "max_gen_toks": MAX_GEN_TOKS,
        **extra_metadata,
    }
    env = dict(
        os.environ, LM_EVAL_FIN_CACHE=str(workdir / "judge.sqlite"), LM_EVAL_FIN_DETAILS_DIR=str(out / "ems")
    )
    env.pop("LM_EVAL_FIN_JUDGE", None)
    if judge:
        env["LM_EVAL_FIN_JUDGE"] = judge
    include = ["--include_path", str(paths.tasks_dir())] if command[0] == "lm_eval" else []  # run adds it
    run = subprocess.run(
        [
            BIN / command[0],
            *command[1:],
            *include,
            "--model",
            "hf",
            "--model_args",
            f"pretrained={model_dir},dtype=float32,max_length={MAX_LENGTH}",
            "--tasks",
            "fin_ems",
            "--apply_chat_template",
            "--gen_kwargs",
            f"max_gen_toks={MAX_GEN_TOKS}",
            "--limit",
            "1",
            "--metadata",
            json.dumps(metadata),
            "--use_cache",
            str(workdir / "responses"),
            "--output_path",
            str(out),
            "--log_samples",
        ],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["fin_ems"]
    samples = [
        json.loads(line) for line in next(out.rglob("samples_fin_ems_*.jsonl")).read_text().splitlines()
    ]
    details = [json.loads(p.read_text()) for p in (out / "ems").glob("fin_ems-*.json")]
    return results, samples, details, run.stdout + run.stderr


def value(results, metric):
    return results[f"{metric},none"]


def test_with_the_embedded_model_as_judge(workdir, embedded_model_dir, embedded_judge_spec):
    results, samples, details, stderr = run_fin_ems(
        workdir,
        embedded_model_dir,
        "judge",
        embedded_judge_spec,
        {"judge_max_tokens": 16, "extract_max_tokens": 16, "max_attempts": 1},
    )
    # one document: judged (EMS in range) or left unjudged by the 135M judge (NaN, and counted)
    unjudged = value(results, "judge_failure") + value(results, "judge_parse_failure")
    assert unjudged in (0.0, 1.0)
    for scorer in ("llm", "rouge", "bertscore"):
        for part in ("precision", "recall", "f1"):
            figure = value(results, f"ems_{scorer}_{part}")
            assert math.isnan(figure) if unjudged else 0.0 <= figure <= 1.0
    for metric in ("bleu", "bertscore_f1", "rouge_l_precision", "rouge_l_recall", "rouge_l_f1"):
        assert 0.0 <= value(results, metric) <= 1.0
    assert not any("offline" in key for key in results)  # never posing as the other variant
    assert value(results, "ems_judge_requests") > 0
    assert value(results, "ems_judge_model_calls") > 0
    assert value(results, "ems_judge_prompt_tokens") > 0
    # the demo transcript is longer than the context allows: cut, question kept whole
    assert value(results, "truncated_documents") == 1
    prompt = samples[0]["arguments"]["gen_args_0"]["arg_0"]
    assert TRUNCATION_MARK.strip() in prompt
    assert samples[0]["doc"]["question"] in prompt
    assert "Left truncation" not in stderr  # lm-eval did not have to cut anything itself
    (run_details,) = details
    assert run_details["method"] == "llm" and run_details["judge"] == embedded_judge_spec
    assert [d["id"] for d in run_details["documents"]] == [s["doc"]["id"] for s in samples]
    assert {"reference_points", "answer_points", "alignment", "scores", "parse_failures", "judge_error"} <= set(
        run_details["documents"][0]
    )
    assert run_details["judge_failures"]["failed"] + run_details["judge_failures"]["unparsed"] == unjudged


def test_offline_without_a_judge(workdir, embedded_model_dir):
    results, samples, details, _ = run_fin_ems(workdir, embedded_model_dir, "offline", None, {})
    for scorer in ("rouge", "bertscore"):
        for part in ("precision", "recall", "f1"):
            assert 0.0 <= value(results, f"ems_offline_{scorer}_{part}") <= 1.0
    assert not any(
        key.startswith(("ems_llm", "ems_rouge", "ems_bertscore", "ems_judge", "judge_"))
        for key in results
    )
    assert value(results, "truncated_documents") == 1
    assert len(samples) == 1 and details[0]["method"] == "offline"


TABLE_1 = [
    "bleu",
    "rouge_l_precision", "rouge_l_recall", "rouge_l_f1",
    "bertscore_f1",
    "ragchecker_precision", "ragchecker_recall", "ragchecker_f1",
    "ems_rouge_precision", "ems_rouge_recall", "ems_rouge_f1",
    "ems_bertscore_precision", "ems_bertscore_recall", "ems_bertscore_f1",
    "ems_llm_precision", "ems_llm_recall", "ems_llm_f1",
]


def test_lm_eval_fin_run_with_a_scripted_judge_prints_every_table_1_column(workdir, embedded_model_dir):
    with ScriptedJudgeServer() as server:
        results, samples, details, output = run_fin_ems(
            workdir, embedded_model_dir, "scripted", None, {}, command=("lm-eval-fin", "run", "--judge", server.spec)
        )
        received = server.stats()["calls"]
    for column in TABLE_1:
        assert 0.0 <= value(results, column) <= 1.0, column
    printed = output.replace(" ", "")
    for column in TABLE_1:  # the table lm-eval prints has every column too
        assert f"|{column}|" in printed, column
    assert value(results, "judge_failure") == value(results, "judge_parse_failure") == 0.0
    # summary removal, extraction, matching with the claim checks, then scoring of the matched
    # pairs: four batched rounds, three when nothing matched (the 135M model's 16-token answers
    # seldom match; tests/test_ems_pipeline.py checks the fourth round by hand)
    (run_details,) = details
    rounds = [entry["name"] for entry in run_details["judge_rounds"]]
    matched = any(point != -1 for doc in run_details["documents"] for point in doc["alignment"])
    assert rounds == ["summary", "extract", "match + claims", *(["score"] if matched else [])]
    assert value(results, "ems_judge_rounds") == len(rounds)
    assert value(results, "ems_judge_model_calls") == received == sum(e["requests"] for e in run_details["judge_rounds"])
    assert run_details["summary_removal"] == "round" and run_details["judge"] == server.spec
    (doc,) = run_details["documents"]
    assert len(doc["verdicts"]["reference"]) == len(doc["reference_points"]) > 0
    assert doc["ragchecker"][0] == value(results, "ragchecker_precision")
