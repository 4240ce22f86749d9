"""Served models: ``vllm serve`` (the embedded SmolLM2, float32, CPU, loopback; tests_vllm/served.py)
as the model under test through lm-eval's ``local-chat-completions`` and as the judge through
our ``openai:`` backend, as a user with a GPU node would run them.

* each benchmark (--limit 2) through the server, its results the same metrics as the same
  task run in-process with ``--model vllm``; fin_ems and fin_lfqa judged in the run by
  ``--judge openai:URL#smollm2``, whose JSON schemas the server enforces (its request log
  shows each request's structured output);
* ``lm-eval-fin score`` of the served runs' samples against the server;
* ``lm-eval-fin rerank`` against a server killed mid-run (SIGKILL to its processes): exit
  status 1 with the line that says to re-run; restarted on its port, the same command sends
  only what was not answered (the restart loads while the score tests run: conftest.py
  orders the tests that need it after them);
* scale-out: one judge over both servers spreads its requests over them (vLLM's own request
  counters say so) and, when one is killed mid-batch, finishes on the other.

Assertions read lm-eval's results files through runs.py's helpers (metric names, values in
range or undefined), never a per-sample value's type."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
import time
from types import SimpleNamespace

import pytest

from lm_eval_fin import cli
from lm_eval_fin.judge import JudgeOptions, JudgeRequest, load_judge
from lm_eval_fin.plumbing import paths
from tests.logged_runs import ems_judge_usage, read_task_run
from tests_vllm import figures
from tests_vllm.runs import (
    check_judged_ems,
    copy_judged_runs,
    in_unit_range,
    metric_names,
    results_of,
)

VERDICT = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["score"],
    "additionalProperties": False,
}
STRUCTURED_JSON = "structured_outputs=StructuredOutputsParams(json="


def verdicts(count: int, topic: str) -> list[JudgeRequest]:
    return [JudgeRequest(messages=({"role": "user", "content": f"Grade the answer '{topic} rose {i}%' from 1 to 5. "
                                    "Reply as JSON."},), json_schema=VERDICT, max_tokens=12) for i in range(count)]


def cache_rows(path) -> dict[str, float]:
    """key -> time stored, of every answer in a judge cache file (none while it is created)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return dict(conn.execute("SELECT key, created FROM completions"))
    except sqlite3.OperationalError:  # no file or no table yet
        return {}


def record_served(name: str, run) -> None:
    figures.record(f"served run {name}: wall (s)", f"{run.wall_s:.0f}")


# ------------------------------------------------------------------------- killed and restarted


@pytest.fixture(scope="session")  # not module: this module's tests run in three groups (conftest.py)
def killed_mid_run(servers, tmp_path_factory):
    """``lm-eval-fin rerank`` against the second server, which is killed once the first answers
    are in the cache; then the server is started again, in the background (the tests between
    this one and the re-run work while it loads)."""
    server = servers[1]
    server.wait()
    folder = tmp_path_factory.mktemp("rerank_killed")
    cache = folder / "rerank.sqlite"
    argv = ["rerank", "--data", str(paths.data_path("finagentbench_demo")), "--judge", server.judge_spec,
            "--judge_max_tokens", "24", "--judge_max_retries", "1", "--judge_backoff", "0.2",
            "--judge_retry_unparsable", "no", "--max_attempts", "1", "--limit", "1", "--variant", "full",
            "--out", str(folder / "rerank.jsonl")]
    status, out, err = [], io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.setenv("LM_EVAL_FIN_CACHE", str(cache))
        command = threading.Thread(target=lambda: status.append(cli.main(argv)))
        command.start()
        deadline = time.monotonic() + 600
        while not cache_rows(cache) and command.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)  # the first answers are in: kill it now
        server.kill()
        command.join()
    server.start()
    return SimpleNamespace(argv=argv, cache=cache, answered=cache_rows(cache), status=status, err=err.getvalue())


def test_a_server_killed_mid_run_stops_the_command_with_status_1(killed_mid_run):
    run = killed_mid_run
    assert run.answered, f"nothing was answered before the kill:\n{run.err[-3000:]}"
    assert run.status == [1], run.err[-3000:]
    assert "resumes from the judge cache" in run.err.strip().splitlines()[-1]


def test_restarted_it_gets_only_what_was_not_answered(killed_mid_run, server_back, monkeypatch, capsys):
    run = killed_mid_run
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(run.cache))
    assert cli.main(run.argv) == 0
    assert "0 failed" in capsys.readouterr().out
    after = cache_rows(run.cache)
    # what was answered before the kill was not asked again (its rows are as they were), and
    # what the restarted server answered is exactly what was missing
    assert {key: after[key] for key in run.answered} == run.answered
    assert server_back.requests_served() == len(after) - len(run.answered) > 0
    figures.record("served rerank: answered before the kill, sent after the restart",
                   f"{len(run.answered)}, {len(after) - len(run.answered)}")


# ------------------------------------------------------------------------------------ scale-out


def test_one_judge_over_two_servers_spreads_and_survives_one_killed(servers, server_back, tmp_path, monkeypatch):
    first, second = servers
    first.wait()
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(tmp_path / "scale-out.sqlite"))
    judge = load_judge(f"openai:{first.base_url},{second.base_url}#{first.name}",
                       JudgeOptions(concurrency=4, max_retries=2, backoff_s=0.2))
    before = first.requests_served(), second.requests_served()
    started = time.perf_counter()
    responses = judge.complete(verdicts(16, "revenue"))
    spread_s = time.perf_counter() - started
    assert all(json.loads(r.text)["score"] in range(1, 6) for r in responses), [r.error for r in responses]
    served = first.requests_served() - before[0], second.requests_served() - before[1]
    assert sum(served) == 16 and min(served) >= 4, served
    figures.record("served judge over two servers: requests each, wall (s)", f"{served}, {spread_s:.1f}")

    # one server killed mid-batch: its requests are re-sent to the other, none fails
    done = []
    batch = threading.Thread(target=lambda: done.append(judge.complete(verdicts(24, "margin"))))
    batch.start()
    while len(cache_rows(tmp_path / "scale-out.sqlite")) < 16 + 4:
        assert batch.is_alive(), "the batch ended before the kill"
        time.sleep(0.05)
    second.kill()
    batch.join()
    (responses,) = done
    assert all(r.text for r in responses), [r.error for r in responses if not r.text]
    stats = judge.last_batch
    assert stats.failures == 0 and stats.extra.get("endpoint_outages", 0) >= 1, stats.summary()


# ------------------------------------------------------------------------------- served runs


def test_score_of_the_served_runs_against_the_server(served_runs, servers, tmp_path, monkeypatch, capsys):
    server = servers[0]
    root = copy_judged_runs(served_runs, tmp_path / "served")
    served_runs.result("served/agentbench")  # the server has no other client now: its counter is ours
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(tmp_path / "score.sqlite"))
    argv = ["score", str(root), "--judge", server.judge_spec, "--judge_max_tokens", "32", "--confirm_run_unsafe_code"]
    before = server.requests_served()
    status = cli.main(argv)
    capsys.readouterr()
    assert server.requests_served() > before
    lfqa_run, _ = read_task_run(root / "lfqa", "fin_lfqa", model="fin-replay")
    lfqa = lfqa_run.results["results"]["fin_lfqa"]
    assert (lfqa["judge_failure,none"], lfqa["judge_parse_failure,none"]) == (0.0, 0.0)
    assert 3.0 <= lfqa["judge_score,none"] <= 15.0
    ems_run, _ = read_task_run(root / "ems", "fin_ems", model="fin-replay")
    unjudged = check_judged_ems(ems_run.results["results"]["fin_ems"])
    assert status == (1 if unjudged else 0)

    # again: every answer from the cache, nothing reaches the server
    before = server.requests_served()
    assert cli.main([*argv, "--judge_retry_unparsable", "no"]) == status
    capsys.readouterr()
    assert server.requests_served() == before


def test_fin_agentbench_through_the_server(served_runs, runs):
    run = served_runs.result("served/agentbench").check()
    record_served("agentbench", run)
    served, local = served_runs.output("served/agentbench"), runs.output("agentbench")
    for task, k in (("fin_agentbench_doc", 5), ("fin_agentbench_chunk", 10)):
        results = results_of(served, task)
        in_unit_range(results, f"ndcg@{k}", f"map@{k}", f"mrr@{k}", "parse_failure")
        assert metric_names(results) == metric_names(results_of(local, task))
        samples = [json.loads(line) for line in next(served.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        assert len(samples) == 2 and all(isinstance(s["resps"][0][0], str) and s["resps"][0][0] for s in samples)


def test_fin_ems_judged_by_the_served_judge(served_runs, runs, servers):
    run = served_runs.result("served/ems")
    record_served("ems", run)
    results = results_of(served_runs.output("served/ems"), "fin_ems")
    in_unit_range(results, "bleu", "bertscore_f1", "rouge_l_f1")
    unjudged = check_judged_ems(results)
    assert run.returncode == (1 if unjudged else 0), run.stderr[-3000:]
    ((_, usage),) = ems_judge_usage(run.output)
    assert usage["model_calls"] > 0
    assert metric_names(results) == metric_names(results_of(runs.output("ems_judged"), "fin_ems"))
    # the judge's requests reached the server with their JSON schema, which vLLM enforced
    assert STRUCTURED_JSON in servers[0].log_text()


def test_fin_lfqa_judged_by_the_served_judge(served_runs, runs):
    run = served_runs.result("served/lfqa").check()
    record_served("lfqa", run)
    results = results_of(served_runs.output("served/lfqa"), "fin_lfqa")
    in_unit_range(results, "numeric_f1", "evidence_f1", "rouge_l", "bertscore_f1")
    assert (results["judge_skipped,none"], results["judge_failure,none"]) == (0.0, 0.0)
    # the server enforces the verdict's JSON schema: every verdict parses
    assert results["judge_parse_failure,none"] == 0.0 and 3.0 <= results["judge_score,none"] <= 15.0
    assert metric_names(results) == metric_names(results_of(runs.output("lfqa_judged"), "fin_lfqa"))
