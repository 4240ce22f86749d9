"""``lm-eval-fin score``: the logged answers of a ``--predict_only`` run replayed through lm-eval
(``--model fin-replay``) and scored by the task's own filter stage and ``process_results``;
lm-eval writes a normal results file and samples file with a new run id. A judge that fails or
answers unreadably leaves those documents' values null, counted in ``judge_failure`` /
``judge_parse_failure``, and the command exits 1; a warm re-run calls no model. Judges are
real servers on 127.0.0.1 (tests/openai_server.py); lm-eval-format folders are written by hand
(tests/logged_runs.py) in the shape a --predict_only run leaves them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin import cli
from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import rescore, taskfiles
from lm_eval_fin.harness.benchmark import benchmark_of
from lm_eval_fin.outputs import records, runfiles
from tests.logged_runs import (
    DATE,
    MODEL,
    lfqa_documents,
    predict_only_sample,
    strict_json,
    write_predict_only_run,
    write_samples,
)
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
VERDICT = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})
# by hand against the first fixture document (0-based: CWT [1] is its table): numbers {25, 1.25e8}
# of the reference's {25, 1e8, 1.25e8, 1.1e8}; evidence {CWT 1} of {CWT 1, AWK 1}
GOOD = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"
UNREADABLE = "1. Flat. [[reply:I would give it a four.]]\nEvidence: CWT [1]"  # the server's reply to it
FAILING = "1. Flat. [[status:500]]\nEvidence: CWT [1]"  # the server answers HTTP 500 to it
JUDGE_METRICS = ("judge_score", "judge_accuracy", "judge_numerical", "judge_entailment")


def score(*argv):
    """``lm-eval-fin score`` in this process."""
    args = cli.build_parser().parse_args(["score", *map(str, argv)])
    return rescore.main(args, all_benchmarks())


def strict_samples(path):
    """Every line of a samples file, parsed as strict JSON (no NaN, no Infinity)."""
    return [strict_json(line) for line in path.read_text().splitlines()]


def scored_runs(root):
    """The runs ``score`` wrote under ``root`` (lm-eval's model: fin-replay), oldest first, each
    file checked to be strict JSON."""
    runs, unreadable = runfiles.read_results_dirs([root])
    assert all("a --predict_only run" in u.reason for u in unreadable), unreadable  # the logged run: no figure
    scored = [run for run in runs if run.config.get("model") == "fin-replay"]
    for run in scored:
        strict_json(run.source.read_text())
    return scored


def asked(server, marker):
    """How many requests the judge server received for the answer that holds ``marker``."""
    return sum(count for message, count in server.stats()["seen"].items() if marker in message)


def test_score_replays_logged_answers_through_lm_eval_and_a_warm_rerun_calls_the_model_for_nothing_answered(
    tmp_path, judge_cache
):
    """The console script on a --predict_only folder: lm-eval's own results and samples files
    beside the run's, every metric per sample; the unreadable verdict and the failed request
    null and counted, exit status 1; run again, only the failed request is sent."""
    docs = lfqa_documents(tmp_path, 3)
    write_predict_only_run(tmp_path / "out", "fin_lfqa", docs, [GOOD, UNREADABLE, FAILING])
    fast = ["--judge_max_retries", "1", "--judge_backoff", "0", "--judge_timeout", "5", "--confirm_run_unsafe_code"]
    with ServerProcess(reply=VERDICT) as server:
        judge = f"openai:{server.base_url}#m"
        argv = [BIN / "lm-eval-fin", "score", tmp_path / "out", "--judge", judge, *fast]
        first = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=600)
        # one ask of the good answer; three of the unreadable one (max_attempts); the failing
        # request and its one retry (a failure is not asked again: it is no answer)
        assert [asked(server, m) for m in ("rose 25% to", "[[reply:", "[[status:500]]")] == [1, 3, 2]
        warm = subprocess.run([*argv, "--judge_retry_unparsable", "no"], capture_output=True, text=True, cwd=tmp_path,
                              timeout=600)
        # every answer the judge gave from the cache; only the failed request is sent again
        assert [asked(server, m) for m in ("rose 25% to", "[[reply:", "[[status:500]]")] == [1, 3, 4]
    for done in (first, warm):
        assert done.returncode == 1, done.stderr[-3000:]
        errors = [line for line in done.stderr.splitlines() if line.startswith("lm-eval-fin score: error:")]
        assert len(errors) == 1, done.stderr[-3000:]
        assert "fin_lfqa: the judge failed on 1 and answered unreadably on 1 of 3 documents (first error: HTTP 500" in (
            errors[0])
        assert "resume from the judge cache" in errors[0]
        assert "|judge_score" in done.stdout.replace(" ", "")  # lm-eval's table

    folder = tmp_path / "out" / MODEL.replace("/", "__")
    # two scored runs, each of the logged run (the second did not score the first's output too),
    # and nothing but lm-eval's files
    first_run, warm_run = scored_runs(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file()) == sorted(
        [f"results_{DATE}.json", f"samples_fin_lfqa_{DATE}.jsonl",
         *(f"results_{run.date}.json" for run in (first_run, warm_run)),
         *(f"samples_fin_lfqa_{run.date}.jsonl" for run in (first_run, warm_run))])
    assert first_run.source.parent == folder and first_run.date != DATE
    assert first_run.model_args == {"pretrained": MODEL}
    figures = {name: metric.value for name, metric in first_run.tasks["fin_lfqa"].metrics.items()}
    assert (figures["judge_score"], figures["judge_accuracy"]) == (12.0, 4.0)  # the readable verdict alone
    assert (figures["judge_parse_failure"], figures["judge_failure"], figures["judge_skipped"]) == (1 / 3, 1 / 3, 0.0)
    assert {name: m.value for name, m in warm_run.tasks["fin_lfqa"].metrics.items()} == figures

    lines = strict_samples(first_run.tasks["fin_lfqa"].samples_path)
    assert [line["doc"]["id"] for line in lines] == [doc["id"] for doc in docs]
    assert [line["resps"][0][0] for line in lines] == [GOOD, UNREADABLE, FAILING]  # the logged answers
    listed = taskfiles.metric_names("fin_lfqa")
    assert all(set(line) & set(listed) for line in lines)  # the metrics defined for the document
    good, unreadable, failed = lines
    assert (good["numeric_precision"], good["numeric_recall"], good["evidence_recall"]) == (1.0, 0.5, 0.5)
    assert [good[name] for name in JUDGE_METRICS] == [12.0, 4.0, 3.0, 5.0]
    assert [unreadable.get(name) for name in JUDGE_METRICS] == [failed.get(name) for name in JUDGE_METRICS] == [None] * 4
    assert (unreadable["judge_parse_failure"], unreadable["judge_failure"]) == (1.0, 0.0)
    assert (failed["judge_parse_failure"], failed["judge_failure"]) == (0.0, 1.0)
    good_judge = records.decode(good["filtered_resps"])["judge"]
    assert good_judge["spec"] == judge and good_judge["scores"] == json.loads(VERDICT)
    unreadable_judge = records.decode(unreadable["filtered_resps"])["judge"]
    assert (unreadable_judge["reply"], unreadable_judge["scores"], unreadable_judge["error"]) == (
        "I would give it a four.", None, None)
    failed_judge = records.decode(failed["filtered_resps"])["judge"]
    assert failed_judge["error"].startswith("HTTP 500") and failed_judge["scores"] is None


def test_without_a_judge_the_replay_runs_the_sandbox_once_allowed(tmp_path, capsys):
    """``--judge none`` scores what needs no judge; fin_lfqa's scoring runs the answers' code, so
    lm-eval's --confirm_run_unsafe_code is asked for first. --output_path puts the files there."""
    docs = lfqa_documents(tmp_path)
    with_code = GOOD + "\nCode:\n```python\ndef growth():\n    return (125 - 100) / 100 * 100\n```"
    write_predict_only_run(tmp_path / "out", "fin_lfqa", docs, [with_code, GOOD])
    assert score(tmp_path / "out", "--judge", "none") == 2
    assert "scoring fin_lfqa runs the model's code in the sandbox: pass --confirm_run_unsafe_code" in (
        capsys.readouterr().err)
    assert score(tmp_path / "out", "--judge", "none", "--confirm_run_unsafe_code", "--output_path",
                 tmp_path / "scored") == 0
    assert len(list((tmp_path / "out").rglob("*.json*"))) == 2  # the logged run's own files only
    (scored,) = scored_runs(tmp_path / "scored")
    figures = {name: metric.value for name, metric in scored.tasks["fin_lfqa"].metrics.items()}
    assert figures["judge_skipped"] == 1.0
    assert "judge_score" not in figures and "judge_failure" not in figures  # absent: nothing was judged
    assert figures["code_exec_rate"] == 1.0 and figures["code_per_answer"] == 0.5
    with_code_line, plain = strict_samples(scored.tasks["fin_lfqa"].samples_path)
    assert with_code_line["code_exec_rate"] == 1.0 and "code_exec_rate" not in plain  # no snippet: undefined
    assert records.decode(with_code_line["filtered_resps"])["code"][0]["value"] == "25.0"


@pytest.fixture
def lfqa_folder(tmp_path):
    write_predict_only_run(tmp_path / "out", "fin_lfqa", lfqa_documents(tmp_path), [GOOD, GOOD])
    return tmp_path / "out"


@pytest.mark.parametrize(
    "setup, argv, message",
    [
        (lambda out: out, [], "no judge given: pass --judge"),
        (lambda out: out, ["--judge", "gpt4"], "bad judge spec 'gpt4'"),
        (lambda out: out / "missing", ["--judge", "none"], "does not exist"),
        (lambda out: out, ["--judge", "none", "--tasks", "fin_ems"], "no lm-eval samples files for tasks ['fin_ems']"),
        (lambda out: out / "my__model" / f"results_{DATE}.json", ["--judge", "none"], "cannot tell the task"),
        (lambda out: write_samples(out.parent / "other", "arc_easy", [predict_only_sample(0, {"q": 1}, "a")]),
         ["--judge", "none"], "none of the tasks found (arc_easy) is an lm-eval-fin task"),
        (lambda out: write_samples(out.parent / "old", "fin_lfqa", [predict_only_sample(0, {"id": "x"}, "a")]),
         ["--judge", "none"], "document 0 carries no settings"),
    ],
)
def test_bad_input_is_one_clear_error_before_lm_eval_starts(lfqa_folder, monkeypatch, capsys, setup, argv, message):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    assert score(setup(lfqa_folder), *argv, "--confirm_run_unsafe_code") == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1


def test_malformed_samples_line_is_located(lfqa_folder, capsys):
    (path,) = lfqa_folder.rglob("samples_*.jsonl")
    path.write_text(path.read_text() + "{not json\n")
    assert score(path, "--judge", "none") == 2
    assert f"{path.name}:3: not JSON" in capsys.readouterr().err


def test_tasks_find_their_benchmark_by_name():
    benchmarks = all_benchmarks()
    assert benchmark_of("fin_lfqa", benchmarks).name == "fin_lfqa"
    assert benchmark_of("fin_lfqa-test", benchmarks).name == "fin_lfqa"
    assert benchmark_of("fin_ems", benchmarks).name == "fin_ems"
    assert benchmark_of("fin_agentbench_doc", benchmarks).name == "fin_agentbench"
    assert benchmark_of("fin_emsx", benchmarks) is None
    assert {b.name for b in benchmarks if b.judged} == {"fin_ems", "fin_lfqa"}
    match = runfiles.SAMPLES_FILE.match(f"samples_fin_lfqa-test_{DATE}.jsonl")
    assert (match["task"], match["date"]) == ("fin_lfqa-test", DATE)
