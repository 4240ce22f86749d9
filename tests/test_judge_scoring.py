"""``lm-eval-fin score``: finding lm-eval samples files, dispatching to the task family's
judge metrics, writing lm-eval-format results and details; clear errors for bad input.
Judges are real echo servers on 127.0.0.1 (tests/openai_server.py)."""

import json
import math
import subprocess
import sys

import pytest

from lm_eval_fin import cli
from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.benchmarks.fin_lfqa import data as finlfqa_data
from lm_eval_fin.benchmarks.fin_lfqa.judge import JUDGE_METRICS
from lm_eval_fin.harness import rescore, taskfiles
from lm_eval_fin.harness.benchmark import benchmark_of
from lm_eval_fin.harness.samples import SAMPLES_FILE
from tests import judge_toy_family
from tests.finlfqa_fixtures import hub_records
from tests.openai_server import ServerProcess, closed_port

DATE = "2025-01-02T03-04-05.678901"


def lm_eval_sample(doc_id, doc, answer):
    """One line as lm-eval's EvaluationTracker writes it for a generate_until task."""
    return {
        "doc_id": doc_id, "doc": doc, "target": "", "arguments": {"gen_args_0": {"arg_0": "prompt", "arg_1": {}}},
        "resps": [[answer]], "filtered_resps": [answer], "filter": "none", "metrics": ["bypass"],
        "doc_hash": "d", "prompt_hash": "p", "target_hash": "t", "bypass": None,
    }


def write_samples(folder, task, samples, date=DATE):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{date}.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    return path


@pytest.fixture
def run_folder(tmp_path):
    """An lm-eval --predict_only --log_samples output folder with a judge task and another."""
    folder = tmp_path / "out" / "my__model"
    answers = ["abc", "a longer answer", "[[reply:not an echo]]"]
    write_samples(folder, "fin_toy", [lm_eval_sample(i, {"q": i}, a) for i, a in enumerate(answers)])
    write_samples(folder, "fin_agentbench_chunk", [lm_eval_sample(0, {"q": 0}, "1, 2")])
    results = {
        "results": {"fin_toy": {"alias": "fin_toy", "bypass,none": 999, "bypass_stderr,none": "N/A"}},
        "configs": {"fin_toy": {"task": "fin_toy", "metric_list": [
            {"metric": "toy_score", "aggregation": "mean", "higher_is_better": True}]}},
        "versions": {"fin_toy": 1.0}, "higher_is_better": {"fin_toy": {"bypass": True}},
        "n-shot": {"fin_toy": 0}, "config": {"model": "hf", "model_args": "pretrained=my/model"},
    }
    (folder / f"results_{DATE}.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


BENCHMARKS = [*all_benchmarks()]


@pytest.fixture
def toy_family(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "BENCHMARKS", [*all_benchmarks(), judge_toy_family.BENCHMARK])


def score(*argv):
    args = cli.build_parser().parse_args(["score", *map(str, argv)])
    return rescore.main(args, BENCHMARKS)


def test_score_folder_adds_judge_metrics_to_lm_eval_results(run_folder, toy_family, judge_cache, capsys):
    with ServerProcess() as server:
        judge = f"openai:{server.base_url}#m"
        # one answer stays unreadable: the results are written, and the status says so
        assert score(run_folder.parent, "--judge", judge, "--judge_backoff", "0") == 1
        calls = server.stats()["calls"]
        document = json.loads((run_folder / f"judged_results_{DATE}.json").read_text())

        # lm-eval's own results are kept; the judge metrics join them under "metric,filter"
        entry = document["results"]["fin_toy"]
        assert entry["bypass,none"] == 999 and entry["alias"] == "fin_toy"
        assert entry["toy_score,none"] == (len("abc") + len("a longer answer")) / 2
        assert entry["toy_parse_failures,none"] == 1.0
        assert entry["toy_score_stderr,none"] == entry["toy_parse_failures_stderr,none"] == "N/A"
        # higher_is_better from the task's metric_list where lm-eval's results give it
        assert document["higher_is_better"]["fin_toy"] == {"bypass": True, "toy_score": True}
        assert document["n-shot"]["fin_toy"] == 0
        assert document["config"]["model_args"] == "pretrained=my/model"
        assert "fin_agentbench_chunk" not in document["results"]  # no judge metrics: skipped
        stats = document["judge"]["stats"]["fin_toy"]
        assert document["judge"]["spec"] == judge
        assert (stats["requests"], stats["model_calls"], stats["parse_failures"]) == (4, 4, 1)
        assert calls == 4  # 3 samples, 1 re-ask of the unparsable answer

        details = [json.loads(line) for line in (run_folder / f"judged_samples_fin_toy_{DATE}.jsonl").open()]
        assert [d["doc_id"] for d in details] == [0, 1, 2]
        assert [d["parse_failure"] for d in details] == [False, False, True]
        captured = capsys.readouterr()
        assert "toy_score" in captured.out  # lm-eval's results table
        assert "1 judge answers stayed unreadable" in captured.err

        # a second run: same results, our files are not re-read as samples, and only the two
        # cached unparsable answers (first ask and re-ask) are sent again
        assert score(run_folder.parent, "--judge", judge) == 1
        assert server.stats()["calls"] == calls + 2
        again = json.loads((run_folder / f"judged_results_{DATE}.json").read_text())
        assert again["results"]["fin_toy"] == entry
        assert again["judge"]["stats"]["fin_toy"]["extra"]["unparsable_resent"] == 2

        # keeping cached answers as they are: everything from the cache
        assert score(run_folder.parent, "--judge", judge, "--judge_retry_unparsable", "no") == 1
        assert server.stats()["calls"] == calls + 2
    again = json.loads((run_folder / f"judged_results_{DATE}.json").read_text())
    assert again["results"]["fin_toy"] == entry
    assert again["judge"]["stats"]["fin_toy"]["model_calls"] == 0
    assert again["judge"]["options"]["retry_unparsable"] is False


@pytest.mark.parametrize(
    "setup, argv, message",
    [
        (lambda f: f / f"samples_fin_agentbench_chunk_{DATE}.jsonl", ["--judge", "hf:x"],
         "task 'fin_agentbench_chunk' has no judge metrics; tasks with judge metrics: fin_ems, fin_lfqa"),
        (lambda f: f.parent, [], "no judge configured: pass --judge"),
        (lambda f: f.parent, ["--judge", "gpt4"], "bad judge spec 'gpt4'"),
        (lambda f: f / "missing", ["--judge", "hf:x"], "does not exist"),
        (lambda f: f.parent, ["--judge", "hf:x", "--tasks", "fin_lfqa"], "no lm-eval samples files for tasks"),
        (lambda f: f / f"results_{DATE}.json", ["--judge", "hf:x"], "cannot tell the task"),
    ],
)
def test_bad_input_is_one_clear_error(run_folder, toy_family, monkeypatch, capsys, setup, argv, message):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    assert score(setup(run_folder), *argv) == 2
    assert message in capsys.readouterr().err


def test_malformed_samples_line_is_located(tmp_path, toy_family, capsys):
    path = write_samples(tmp_path, "fin_toy", [lm_eval_sample(0, {}, "x")])
    path.write_text(path.read_text() + "{not json\n")
    assert score(path, "--judge", f"hf:{tmp_path}") == 2  # a judge that passes the checks: the line is the problem
    assert f"{path.name}:2: not JSON" in capsys.readouterr().err


def test_task_families_by_name():
    judged = [b for b in all_benchmarks() if b.rescore is not None]
    assert benchmark_of("fin_lfqa", judged).name == "fin_lfqa"
    assert benchmark_of("fin_lfqa_test", judged).name == "fin_lfqa"
    assert benchmark_of("fin_ems", judged).name == "fin_ems"
    assert benchmark_of("fin_emsx", judged) is None
    assert benchmark_of("fin_agentbench_doc", judged) is None
    match = SAMPLES_FILE.match(f"samples_fin_lfqa_test_{DATE}.jsonl")
    assert (match["task"], match["date"]) == ("fin_lfqa_test", DATE)


def test_cli_scores_fin_lfqa_samples(tmp_path, judge_cache):
    """The console script end to end with the real FinLFQA judge metrics."""
    docs = [finlfqa_data.to_document(record, position) for position, record in enumerate(hub_records())]
    answer = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"
    path = write_samples(tmp_path, "fin_lfqa", [lm_eval_sample(i, doc, answer) for i, doc in enumerate(docs)])
    verdict = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})
    with ServerProcess(reply=verdict) as server:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval_fin.cli", "score", str(path), "--judge", f"openai:{server.base_url}#m"],
            capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert server.stats()["calls"] == len(docs)
    document = json.loads((tmp_path / f"judged_results_{DATE}.json").read_text())
    results = document["results"]["fin_lfqa"]
    assert results["judge_score,none"] == 12.0
    assert results["judge_accuracy,none"] == 4.0
    assert results["judge_parse_failure,none"] == results["judge_failure,none"] == 0.0
    # lm-eval's results format without lm-eval's own results file beside the samples
    assert results["judge_score_stderr,none"] == "N/A" and document["n-shot"] == {"fin_lfqa": 0}
    directions = taskfiles.higher_is_better("fin_lfqa")
    assert document["higher_is_better"]["fin_lfqa"] == {name: directions[name] for name in JUDGE_METRICS}
    assert document["n-samples"]["fin_lfqa"] == {"original": len(docs), "effective": len(docs)}
    details = [json.loads(line) for line in (tmp_path / f"judged_samples_fin_lfqa_{DATE}.jsonl").open()]
    assert len(details) == len(docs)
    assert details[0]["judge_reply"] == verdict and details[0]["judge_error"] is None


def test_score_fails_loudly_when_the_judge_fails_and_resumes_from_the_cache(tmp_path, judge_cache, capsys):
    """An unreachable judge is no success: a judge_failure rate (not parse failures), the
    error per sample, exit status 1 with a message; the re-run sends only what failed."""
    docs = [finlfqa_data.to_document(record, position) for position, record in enumerate(hub_records())]
    answers = ["1. fine\nEvidence: CWT [1]", "1. [[status:500]] again\nEvidence: CWT [1]"]
    path = write_samples(tmp_path, "fin_lfqa", [lm_eval_sample(i, doc, a) for i, (doc, a) in enumerate(zip(docs, answers))])
    fast = ["--judge_max_retries", "1", "--judge_backoff", "0", "--judge_timeout", "5"]

    # a server that does not answer at all is known before any request: one line, status 2
    assert score(path, "--judge", f"openai:http://127.0.0.1:{closed_port()}/v1#m", *fast) == 2
    assert "no answer from" in capsys.readouterr().err
    with ServerProcess(fail_rate=1.0) as failing:  # one that answers only errors
        assert score(path, "--judge", f"openai:{failing.base_url}#m", *fast) == 1
    err = capsys.readouterr().err
    assert "2 of 2 judge requests failed for good (first error: HTTP 500" in err
    assert "resumes from the judge cache" in err
    results = json.loads((tmp_path / f"judged_results_{DATE}.json").read_text())["results"]["fin_lfqa"]
    assert results["judge_failure,none"] == 1.0 and results["judge_parse_failure,none"] == 0.0
    assert math.isnan(results["judge_score,none"]) and results["judge_skipped,none"] == 0.0
    details = [json.loads(line) for line in (tmp_path / f"judged_samples_fin_lfqa_{DATE}.jsonl").open()]
    assert [(d["judge_failure"], d["parse_failure"]) for d in details] == [(True, False)] * 2
    assert all(d["judge_error"].startswith("HTTP 500") for d in details)

    verdict = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})
    with ServerProcess(reply=verdict) as server:
        judge = f"openai:{server.base_url}#m"
        assert score(path, "--judge", judge, *fast) == 1  # the server answers 500 to the second
        assert "1 of 2 judge requests failed for good (first error: HTTP 500" in capsys.readouterr().err
        assert server.stats()["calls"] == 1 + 2
        results = json.loads((tmp_path / f"judged_results_{DATE}.json").read_text())["results"]["fin_lfqa"]
        assert (results["judge_score,none"], results["judge_failure,none"]) == (12.0, 0.5)
        # the answered request comes from the cache; only the failed one is sent again
        assert score(path, "--judge", judge, *fast) == 1
        assert server.stats()["calls"] == 3 + 2
