"""Every subcommand, as a user runs it: a judge or model that cannot work is one line and an
exit status that says which kind of problem it is (lm_eval_fin.exit_status), before any work
where it can be known before; the output flag is ``--output_path`` everywhere."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lm_eval_fin import exit_status, hub, paths, textsim
from lm_eval_fin.benchmarks.fin_lfqa import data as finlfqa_data
from tests.finlfqa_fixtures import hub_records
from tests.openai_server import ServerProcess
from tests.test_judge_scoring import lm_eval_sample, write_samples

BIN = Path(sys.executable).parent
MISSING_MODEL = ["--model", "hf", "--model_args", "pretrained=/nonexistent/model"]
LFQA_DEMO = str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl"))
AGENTBENCH_DEMO = str(paths.data_path("finagentbench_demo"))


def lm_eval_fin(*argv, cwd, env=None, timeout=300):
    return subprocess.run([BIN / "lm-eval-fin", *map(str, argv)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def one_line_error(done, status: int, message: str) -> None:
    assert done.returncode == status, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0], done.stderr[-3000:]


@pytest.fixture
def lfqa_samples(tmp_path):
    docs = [finlfqa_data.to_document(record, position) for position, record in enumerate(hub_records())]
    answer = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"
    return write_samples(tmp_path / "run", "fin_lfqa", [lm_eval_sample(i, doc, answer) for i, doc in enumerate(docs)])


# ------------------------------------------------------------------ judges that cannot work


@pytest.mark.parametrize("command", [
    ["rerank", "--data", AGENTBENCH_DEMO, "--variant", "llm", "--limit", "1"],
    ["build", "earnings-call", "--source", ".", "--output_path", "out"],
    ["score", "."],
])
def test_a_bad_judge_spec_is_one_line_on_every_subcommand(tmp_path, command):
    done = lm_eval_fin(*command, "--judge", "gpt-4o", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "bad judge spec 'gpt-4o'")


def test_score_with_an_unloadable_hf_judge_is_one_line(tmp_path, lfqa_samples, judge_cache):
    done = lm_eval_fin("score", lfqa_samples, "--judge", f"hf:{tmp_path / 'no-such-model'}", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "cannot load the model")
    assert "again" not in done.stderr  # running it again cannot help


def test_score_with_a_model_the_server_does_not_serve_says_what_it_serves(tmp_path, lfqa_samples, judge_cache):
    with ServerProcess(reply="{}", models=["judge-a", "judge-b"]) as server:
        done = lm_eval_fin("score", lfqa_samples, "--judge", f"openai:{server.base_url}#gpt-4o", cwd=tmp_path)
        calls = server.stats()["calls"]
    one_line_error(done, exit_status.USAGE, "judge-a")
    assert "gpt-4o" in done.stderr and "again" not in done.stderr
    assert calls <= len(hub_records())  # what was in flight; a 404 is never retried


def test_an_unusable_judge_cache_has_its_own_status(tmp_path, lfqa_samples):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    env = {**os.environ, "LM_EVAL_FIN_CACHE": str(cache)}
    with ServerProcess(reply="{}") as server:
        done = lm_eval_fin("score", lfqa_samples, "--judge", f"openai:{server.base_url}#m", cwd=tmp_path, env=env)
    one_line_error(done, exit_status.JUDGE_CACHE, str(cache))
    with pytest.raises(sqlite3.DatabaseError):  # the file is left as it was, for the user to look at
        sqlite3.connect(cache).execute("select * from sqlite_master").fetchall()


# ------------------------------------------------------ `run` checks its judge and models first


def test_run_checks_the_judge_server_before_lm_eval_starts(tmp_path):
    metadata = json.dumps({"data_path": LFQA_DEMO, "bertscore_model": "offline"})
    with ServerProcess(reply="{}", models=["judge-a"]) as server:
        done = lm_eval_fin("run", *MISSING_MODEL, "--tasks", "fin_lfqa", "--metadata", metadata,
                           "--judge", f"openai:{server.base_url}#judge-b", cwd=tmp_path)
        assert server.stats()["calls"] == 0
    one_line_error(done, exit_status.USAGE, "the server has no model 'judge-b'; it serves judge-a")
    # a server that does not answer is found before generation too
    done = lm_eval_fin("run", *MISSING_MODEL, "--tasks", "fin_lfqa", "--metadata", metadata,
                       "--judge", "openai:http://127.0.0.1:9/v1#m", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "start the server first")


def test_run_names_a_bertscore_model_that_cannot_load_offline(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    done = lm_eval_fin("run", *MISSING_MODEL, "--tasks", "fin_lfqa", "--metadata",
                       json.dumps({"data_path": LFQA_DEMO, "bertscore_model": "roberta-large"}), cwd=tmp_path, env=env)
    one_line_error(done, exit_status.USAGE, "'roberta-large' is not in the local Hugging Face cache")
    assert "bertscore_model 'offline'" in done.stderr


def test_an_unloadable_bertscore_model_costs_no_hub_retries(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    hub.hub_unreachable.cache_clear()
    started = time.perf_counter()
    assert textsim.bertscore_f1(["a b"], ["a c"], model="some-org/not-cached") is None
    assert time.perf_counter() - started < 5  # what this replaces waited ~46 s for the hub
    assert "not in the local Hugging Face cache" in caplog.text
    assert textsim.bertscore_model_problem("offline") is None
    assert "no model folder" in textsim.bertscore_model_problem(str(tmp_path / "nothing"))


# ------------------------------------------------------------------------- one output flag


@pytest.mark.parametrize("flag", ["--output_path", "--out"])
def test_rerank_writes_where_output_path_says_and_keeps_its_old_flag(tmp_path, flag):
    out = tmp_path / "run.jsonl"
    done = lm_eval_fin("rerank", "--data", AGENTBENCH_DEMO, "--variant", "bm25", "--limit", "1", flag, out,
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(row["variant"] == "bm25" for row in rows)


def test_every_subcommand_that_writes_takes_output_path(tmp_path):
    for command in (["rerank"], ["build", "earnings-call"], ["report"], ["export"], ["demo"]):
        done = lm_eval_fin(*command, "--help", cwd=tmp_path)
        assert done.returncode == 0 and "--output_path" in done.stdout, (command, done.stdout[-2000:])
