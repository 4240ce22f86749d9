"""fin_ems through the real CLIs (subprocesses) on the shipped synthetic demo, with the
embedded model under test: ``lm_eval`` with the embedded model as the EMS judge and offline;
``lm-eval-fin run`` with a scripted judge behind the real OpenAI-compatible test server, which
prints every column of the EMS paper's Table 1 in at most four judge rounds; then
``lm-eval-fin score`` of the offline run's logged answers with that judge: the same values,
every verdict from the cache. The later runs reuse the first's generations through lm-eval's
response cache. Per-answer details are read from each sample's scored-answer record."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks.fin_ems.prompt import TRUNCATION_MARK
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths
from tests.ems_scripted_judge import ScriptedJudgeServer
from tests.logged_runs import ems_judge_usage, read_task_run

BIN = Path(sys.executable).parent
MAX_LENGTH, MAX_GEN_TOKS = 480, 16  # small enough that the demo transcripts must be cut
EMS = [f"ems_{scorer}_{part}" for scorer in ("llm", "rouge", "bertscore") for part in ("precision", "recall", "f1")]
OFFLINE = [f"ems_offline_{scorer}_{part}" for scorer in ("rouge", "bertscore") for part in ("precision", "recall", "f1")]
CLAIMS = ["ragchecker_precision", "ragchecker_recall", "ragchecker_f1"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fin_ems_e2e")


def environment(workdir, judge=None):
    env = dict(os.environ, LM_EVAL_FIN_CACHE=str(workdir / "judge.sqlite"))
    env.pop("LM_EVAL_FIN_JUDGE", None)
    if judge:
        env["LM_EVAL_FIN_JUDGE"] = judge
    return env


def run_fin_ems(workdir, model_dir, name, judge, extra_metadata, command=("lm_eval",)):
    """One run of fin_ems, ``lm_eval run`` or ``lm-eval-fin <command>``; (the run, its samples
    lines, its output)."""
    out = workdir / name
    metadata = {
        "data_path": str(paths.data_path("ems_demo")),
        "bertscore_model": "offline",
        "max_gen_toks": MAX_GEN_TOKS,
        **extra_metadata,
    }
    if command == ("lm_eval",):
        program = [sys.executable, "-m", "lm_eval", "run", "--include_path", str(paths.tasks_dir())]
    else:
        program = [BIN / "lm-eval-fin", *command]  # run adds the include path
    done = subprocess.run(
        [
            *program,
            "--model", "hf",
            "--model_args", f"pretrained={model_dir},dtype=float32,max_length={MAX_LENGTH}",
            "--tasks", "fin_ems",
            "--apply_chat_template",
            "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}",
            "--limit", "1",
            "--metadata", json.dumps(metadata),
            "--use_cache", str(workdir / "responses"),
            "--output_path", str(out),
            "--log_samples",
        ],
        capture_output=True, text=True, cwd=workdir, env=environment(workdir, judge), timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    run, lines = read_task_run(out, "fin_ems")
    return run, lines, done.stdout + done.stderr


def figures(run):
    return {name: metric.value for name, metric in run.tasks["fin_ems"].metrics.items()}


def judge_usage(output):
    """(rounds, the judge's usage) fin_ems logged of its one judged pass."""
    (usage,) = ems_judge_usage(output)
    return usage


@pytest.fixture(scope="module")
def offline_run(workdir, embedded_model_dir):
    return run_fin_ems(workdir, embedded_model_dir, "offline", None, {})


def test_with_the_embedded_model_as_judge(workdir, embedded_model_dir, embedded_judge_spec):
    run, lines, output = run_fin_ems(
        workdir, embedded_model_dir, "judge", embedded_judge_spec,
        {"judge_max_tokens": 16, "extract_max_tokens": 16, "max_attempts": 1},
    )
    values = figures(run)
    (line,) = lines
    record = records.decode(line["filtered_resps"])
    # one document: judged (EMS in range) or left unjudged by the 135M judge (null, and counted)
    unjudged = values["judge_failure"] + values["judge_parse_failure"]
    assert unjudged in (0.0, 1.0)
    assert unjudged == (record["ems"]["judge_error"] is not None or any(record["ems"]["parse_failures"].values()))
    for name in EMS:
        assert values.get(name) is None if unjudged else 0.0 <= values[name] <= 1.0, name
        assert line.get(name) == values.get(name)  # one document: its value is the figure
    for name in ("bleu", "bertscore_f1", "rouge_l_precision", "rouge_l_recall", "rouge_l_f1"):
        assert 0.0 <= values[name] <= 1.0, name
    assert all(values.get(name) is None for name in OFFLINE)  # never posing as the other variant
    rounds, usage = judge_usage(output)
    assert 1 <= rounds <= 4 and usage["requests"] > 0 and usage["model_calls"] > 0 and usage["prompt_tokens"] > 0
    # the demo transcript is longer than the context allows: cut, question kept whole
    assert values["truncated_documents"] == 1
    prompt = line["arguments"]["gen_args_0"]["arg_0"]
    assert TRUNCATION_MARK.strip() in prompt and line["doc"]["question"] in prompt
    assert "Left truncation" not in output  # lm-eval did not have to cut anything itself
    # what the pass decided for the answer is in its record
    assert record["ems"]["method"] == "llm" and record["judge"]["spec"] == embedded_judge_spec
    assert {"reference_points", "answer_points", "alignment", "scores", "parse_failures", "judge_error"} <= set(
        record["ems"])


def test_offline_without_a_judge(offline_run):
    run, lines, _ = offline_run
    values = figures(run)
    for name in OFFLINE:
        assert 0.0 <= values[name] <= 1.0, name
    # no judged metric in the results: nothing was judged
    assert all(values.get(name) is None for name in EMS + CLAIMS + ["judge_failure", "judge_parse_failure"])
    assert values["truncated_documents"] == 1
    (line,) = lines
    record = records.decode(line["filtered_resps"])
    assert record["ems"]["method"] == "offline" and record["judge"] is None
    assert [line[name] for name in OFFLINE] == [values[name] for name in OFFLINE]


TABLE_1 = [
    "bleu",
    "rouge_l_precision", "rouge_l_recall", "rouge_l_f1",
    "bertscore_f1",
    *CLAIMS,
    "ems_rouge_precision", "ems_rouge_recall", "ems_rouge_f1",
    "ems_bertscore_precision", "ems_bertscore_recall", "ems_bertscore_f1",
    "ems_llm_precision", "ems_llm_recall", "ems_llm_f1",
]


def test_a_scripted_judge_prints_every_table_1_column_and_score_replays_it_from_the_cache(
    workdir, embedded_model_dir, offline_run
):
    with ScriptedJudgeServer() as server:
        run, (line,), output = run_fin_ems(
            workdir, embedded_model_dir, "scripted", None, {}, command=("run", "--judge", server.spec)
        )
        received = server.stats()["calls"]
        # the offline run's logged answer (the same generation, from lm-eval's cache) scored later
        offline_out = workdir / "offline"
        score = subprocess.run(
            [BIN / "lm-eval-fin", "score", offline_out, "--judge", server.spec], capture_output=True, text=True,
            cwd=workdir, env=environment(workdir), timeout=600,
        )
        assert score.returncode == 0, score.stderr[-4000:]
        assert server.stats()["calls"] == received  # every verdict from the cache the live run filled
    values = figures(run)
    for column in TABLE_1:
        assert 0.0 <= values[column] <= 1.0, column
    printed = output.replace(" ", "")
    for column in TABLE_1:  # the table lm-eval prints has every column too
        assert f"|{column}|" in printed, column
    assert values["judge_failure"] == values["judge_parse_failure"] == 0.0
    # summary removal, extraction, matching with the claim checks, then scoring of the matched
    # pairs: four batched rounds, three when nothing matched (the 135M model's 16-token answers
    # seldom match; tests/test_ems_pipeline.py checks the fourth round by hand)
    record = records.decode(line["filtered_resps"])["ems"]
    matched = any(point != -1 for point in record["alignment"])
    rounds, usage = judge_usage(output)
    assert rounds == 3 + matched
    for stage in ("EMS summary", "EMS extract", "EMS match + claims", *(["EMS score"] if matched else [])):
        assert f"{stage} [{server.spec}]" in output, stage
    assert usage["model_calls"] == received == usage["requests"] and usage["cache_hits"] == 0
    assert record["summary_removal"] == "round"
    assert len(record["verdicts"]["reference"]) == len(record["reference_points"]) > 0
    assert record["ragchecker"][0] == line["ragchecker_precision"] == values["ragchecker_precision"]

    # score: lm-eval's results and samples beside the offline run's, with the live run's values
    scored, (scored_line,) = read_task_run(offline_out, "fin_ems", model="fin-replay")
    assert scored.date != offline_run[0].date and scored.source.parent == offline_run[0].source.parent
    assert scored_line["resps"] == offline_run[1][0]["resps"] == line["resps"]
    for name in taskfiles.metric_names("fin_ems"):  # the same metrics defined, with the same values
        assert scored_line.get(name) == line.get(name), name
    assert records.decode(scored_line["filtered_resps"])["judge"] == records.decode(line["filtered_resps"])["judge"]
    replayed_rounds, replayed_usage = judge_usage(score.stderr)
    assert replayed_rounds == rounds and replayed_usage["model_calls"] == 0
    assert replayed_usage["cache_hits"] == replayed_usage["requests"] == usage["requests"]
