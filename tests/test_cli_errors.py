"""Every subcommand, as a user runs it: a judge or model that cannot work is one line and an
exit status that says which kind of problem it is (lm_eval_fin.plumbing.exit_status), before any work
where it can be known before; the output flag is ``--output_path`` everywhere."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lm_eval_fin.measures import textsim
from lm_eval_fin.plumbing import exit_status, hub, paths
from tests.logged_runs import lfqa_documents, write_predict_only_run
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
# a folder that exists but holds no model: the model check lets it through, and lm-eval would
# fail on it at once should a check under test let the run start
NOT_A_MODEL = ["--model", "hf", "--model_args", f"pretrained={Path(__file__).parent}"]
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
    """A --predict_only run's samples file of fin_lfqa (two documents)."""
    answer = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"
    return write_predict_only_run(tmp_path / "run", "fin_lfqa", lfqa_documents(tmp_path), [answer, answer])


# ------------------------------------------------------------------ judges that cannot work


@pytest.mark.parametrize("command", [
    ["rerank", "--data", AGENTBENCH_DEMO, "--variant", "llm", "--limit", "1"],
    ["build", "earnings-call", "--source", ".", "--output_path", "out"],
    ["score", "."],
])
def test_a_bad_judge_spec_is_one_line_on_every_subcommand(tmp_path, command):
    done = lm_eval_fin(*command, "--judge", "gpt-4o", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "bad judge spec 'gpt-4o'")


# `score` checks its judge as `run` does, before lm-eval starts: no replay, no request, and no
# documents left unjudged that running it again could not judge either


def test_score_with_an_unloadable_hf_judge_is_one_line(tmp_path, lfqa_samples, judge_cache):
    done = lm_eval_fin("score", lfqa_samples, "--judge", f"hf:{tmp_path / 'no-such-model'}",
                       "--confirm_run_unsafe_code", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "no model folder")
    assert "again" not in done.stderr  # running it again cannot help
    assert len(list(tmp_path.rglob("results_*.json"))) == 1  # the logged run's: lm-eval never started


def test_score_with_a_model_the_server_does_not_serve_says_what_it_serves(tmp_path, lfqa_samples, judge_cache):
    with ServerProcess(reply="{}", models=["judge-a", "judge-b"]) as server:
        done = lm_eval_fin("score", lfqa_samples, "--judge", f"openai:{server.base_url}#gpt-4o",
                           "--confirm_run_unsafe_code", cwd=tmp_path)
        calls = server.stats()["calls"]
    one_line_error(done, exit_status.USAGE, "has no model 'gpt-4o'; it serves judge-a, judge-b")
    assert "again" not in done.stderr and calls == 0


def test_an_unusable_judge_cache_has_its_own_status(tmp_path, lfqa_samples):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    env = {**os.environ, "LM_EVAL_FIN_CACHE": str(cache)}
    with ServerProcess(reply="{}") as server:
        done = lm_eval_fin("score", lfqa_samples, "--judge", f"openai:{server.base_url}#m",
                           "--confirm_run_unsafe_code", cwd=tmp_path, env=env)
        assert server.stats()["calls"] == 0
    one_line_error(done, exit_status.JUDGE_CACHE, str(cache))
    with pytest.raises(sqlite3.DatabaseError):  # the file is left as it was, for the user to look at
        sqlite3.connect(cache).execute("select * from sqlite_master").fetchall()


# ------------------------------------------------------ `run` checks its judge and models first


def test_run_checks_the_judge_server_before_lm_eval_starts(tmp_path):
    metadata = json.dumps({"data_path": LFQA_DEMO, "bertscore_model": "offline"})
    with ServerProcess(reply="{}", models=["judge-a"]) as server:
        done = lm_eval_fin("run", *NOT_A_MODEL, "--confirm_run_unsafe_code", "--tasks", "fin_lfqa", "--metadata", metadata,
                           "--judge", f"openai:{server.base_url}#judge-b", cwd=tmp_path)
        assert server.stats()["calls"] == 0
    one_line_error(done, exit_status.USAGE, "has no model 'judge-b'; it serves judge-a")
    # a server that does not answer is found before generation too
    done = lm_eval_fin("run", *NOT_A_MODEL, "--confirm_run_unsafe_code", "--tasks", "fin_lfqa", "--metadata", metadata,
                       "--judge", "openai:http://127.0.0.1:9/v1#m", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "start the server first")


def test_run_stops_before_generation_when_prompts_cannot_be_fitted(tmp_path):
    """Issue 23: a tokenizer that does not load left the chunk prompts whole (and lm-eval cut
    them from the left). Now the task's load stops the run: one line, status 2. The dummy model
    loads nothing, so the task's loader is the first to read pretrained=."""
    done = lm_eval_fin("run", "--model", "dummy", "--model_args", "pretrained=/nonexistent/model",
                       "--tasks", "fin_agentbench_chunk", "--metadata", json.dumps({"data_path": AGENTBENCH_DEMO}),
                       "--limit", "1", cwd=tmp_path)
    one_line_error(done, exit_status.USAGE,
                   "fin_agentbench_chunk: cannot fit prompts to the model's context: the tokenizer of '/nonexistent/model'")


def test_run_names_a_bertscore_model_that_cannot_load_offline(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    done = lm_eval_fin("run", *NOT_A_MODEL, "--confirm_run_unsafe_code", "--tasks", "fin_lfqa", "--metadata",
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


# --------------------------- issue 22: one test per exit status of the README table, before any model

LFQA_METADATA = json.dumps({"data_path": LFQA_DEMO, "bertscore_model": "offline"})
UNRESOLVABLE = "openai:http://no-such-host.invalid:8000/v1#m"  # .invalid never resolves (RFC 6761)


def no_model_loaded(done):
    """lm-eval says "Initializing <model> model" when it starts building the model under test."""
    assert "Initializing" not in done.stderr, done.stderr[-3000:]


def test_exit_2_run_with_a_model_that_is_not_here(tmp_path):
    done = lm_eval_fin("run", "--model", "hf", "--model_args", "pretrained=/nonexistent", "--confirm_run_unsafe_code", "--tasks", "fin_lfqa",
                       "--metadata", LFQA_METADATA, cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "--model_args pretrained: no model folder '/nonexistent'")
    no_model_loaded(done)


def test_exit_2_run_with_data_its_scorer_cannot_use(tmp_path):
    records = [json.loads(line) for line in paths.data_path("finagentbench_demo", "chunk_ranking_demo.jsonl")
               .read_text(encoding="utf-8").splitlines()]
    records[1]["qrel"] = None
    data = tmp_path / "chunk_ranking_dev.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = lm_eval_fin("run", *NOT_A_MODEL, "--tasks", "fin_agentbench_chunk", "--metadata",
                       json.dumps({"data_path": str(data)}), cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, f"{data}:2: no 'qrel'")
    no_model_loaded(done)


@pytest.fixture
def https_to_http():
    """An http server named with https: the TLS handshake fails."""
    with ServerProcess(reply="{}", models=["m"]) as server:
        yield f"openai:{server.base_url.replace('http://', 'https://')}#m"


@pytest.mark.parametrize("command, address", [("score", "unresolvable"), ("rerank", "https_to_http")])
def test_exit_2_score_and_rerank_with_a_judge_that_cannot_answer(tmp_path, lfqa_samples, judge_cache, command,
                                                                   address, request):
    """Each command and each address once: both commands ask lm_eval_fin.judge.preflight."""
    spec = UNRESOLVABLE if address == "unresolvable" else request.getfixturevalue("https_to_http")
    argv = [lfqa_samples, "--confirm_run_unsafe_code"] if command == "score" else [
        "--data", AGENTBENCH_DEMO, "--variant", "llm", "--limit", "1"]
    done = lm_eval_fin(command, *argv, "--judge", spec, cwd=tmp_path)
    one_line_error(done, exit_status.USAGE, "no answer from")
    assert "again" not in done.stderr  # as `run` says it: no retries, no "run again"


def test_exit_2_rerank_reports_every_problem_it_sees(tmp_path):
    done = lm_eval_fin("rerank", "--data", tmp_path / "missing.jsonl", "--judge", "gpt-4o", cwd=tmp_path)
    assert done.returncode == exit_status.USAGE and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 2 and "missing.jsonl' does not exist" in errors[0] and "bad judge spec 'gpt-4o'" in errors[1]


def test_exit_3_run_with_a_corrupt_judge_cache(tmp_path):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    env = {**os.environ, "LM_EVAL_FIN_CACHE": str(cache)}
    with ServerProcess(reply="{}", models=["m"]) as server:
        done = lm_eval_fin("run", *NOT_A_MODEL, "--confirm_run_unsafe_code", "--tasks", "fin_lfqa", "--metadata", LFQA_METADATA,
                           "--judge", f"openai:{server.base_url}#m", cwd=tmp_path, env=env)
        assert server.stats()["calls"] == 0
    one_line_error(done, exit_status.JUDGE_CACHE, f"the judge cache {cache} is not a usable judge cache")
    no_model_loaded(done)


def as_unprivileged(tmp_path):
    """A command prefix under which file permissions hold: none for a user, ``unshare -U`` for
    root (a user namespace without root's capabilities over the files)."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode != 0:
        pytest.skip("root here, and no user namespace to drop root's file permissions")
    return ["unshare", "-U"]


def test_exit_3_a_read_only_cache_is_named_read_only_and_kept(tmp_path, lfqa_samples):
    """The decision: a read-only cache is an error (every answer and claim of the run would be
    lost), said as such, with a fix that keeps its answers: never 'delete it'."""
    from lm_eval_fin.judge.cache import CachedAnswer, JudgeCache

    prefix = as_unprivileged(tmp_path)
    cache = tmp_path / "shared" / "judge.sqlite"
    cache.parent.mkdir()
    JudgeCache(cache).put("openai:x#m", "k", CachedAnswer("t", 1, 1))
    cache.chmod(0o444)
    env = {**os.environ, "LM_EVAL_FIN_CACHE": str(cache)}
    with ServerProcess(reply="{}", models=["m"]) as server:
        done = subprocess.run([*prefix, BIN / "lm-eval-fin", "score", lfqa_samples, "--confirm_run_unsafe_code",
                               "--judge", f"openai:{server.base_url}#m"], capture_output=True, text=True, cwd=tmp_path,
                              env=env)
    one_line_error(done, exit_status.JUDGE_CACHE, f"the judge cache {cache} is read-only")
    assert "delete" not in done.stderr and "copy it" in done.stderr
    assert JudgeCache(cache).get_many(["k"])["k"].text == "t"


def test_exit_1_a_write_that_fails_keeps_the_old_file_whole(tmp_path):
    """A full disk half way through writing: one line naming the file, and the old file as it was."""
    import resource
    import signal

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # kept across exec: a write past the limit fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "runs" / "rankings.jsonl"
    out.parent.mkdir()
    out.write_text("the rankings of an earlier run\n")
    done = subprocess.run([BIN / "lm-eval-fin", "rerank", "--data", AGENTBENCH_DEMO, "--variant", "bm25",
                           "--output_path", out], capture_output=True, text=True, cwd=tmp_path, preexec_fn=small_disk)
    one_line_error(done, exit_status.INCOMPLETE, f"File too large: '{out}'")
    assert out.read_text() == "the rankings of an earlier run\n"
    assert [p.name for p in out.parent.iterdir()] == ["rankings.jsonl"]  # no temporary file left
