"""lm-eval's ``--model vllm`` through ``lm-eval-fin run`` (the real CLI, a child process per run)
on every benchmark, with the embedded SmolLM2-135M on CPU: metrics present and in range;
fin_ems offline and judged by a ``vllm:`` judge in the same process as the model under test
(one engine in memory at a time); fin_lfqa judged in-harness with vLLM's default engine
processes; and the two-stage path, generation with ``--predict_only`` then ``lm-eval-fin
score`` with a vllm judge. A 135M model ranks and answers badly: these tests check that the
pieces run and report sane figures, not the model's quality."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from lm_eval_fin import cli, paths
from lm_eval_fin.judge import vllm_backend
from tests.finlfqa_fixtures import write_hub_fixture
from tests_vllm import figures
from tests_vllm.processes import run_cli

GIB = 2**30
ANSWER_TOKENS = 32  # fin_ems and fin_lfqa answers: enough to say something, short to generate
JUDGE_FLAGS = ["--judge-max-tokens", "16", "--judge-max-model-len", "4096"]


def model_flags(model_dir: str) -> list[str]:
    # float32: on an AVX2 CPU without bf16 instructions vLLM's bfloat16 matmuls fall back to slow
    # torch code (prefill here is 2-3x slower than in float32)
    return ["--model", "vllm", "--model_args", f"pretrained={model_dir},dtype=float32,max_model_len=4096,enforce_eager=True",
            "--apply_chat_template", "--batch_size", "auto"]


def results_of(out: Path, task: str, pattern: str = "results_*.json") -> dict:
    (path,) = list(out.rglob(pattern))
    return json.loads(path.read_text())["results"][task]


def in_unit_range(results: dict, *metrics: str) -> None:
    for metric in metrics:
        value = results[f"{metric},none"]
        assert 0.0 <= value <= 1.0, (metric, value)


def env_with(**overrides) -> dict:
    return {**os.environ, **{name: str(value) for name, value in overrides.items()}}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("vllm_harness")


@pytest.fixture(scope="module")
def lfqa_data(workdir):
    return write_hub_fixture(workdir / "finlfqa.jsonl")


def ems_metadata(**extra) -> str:
    return json.dumps({"data_path": str(paths.data_path("ems_demo")), "bertscore_model": "offline",
                       "max_gen_toks": ANSWER_TOKENS, **extra})


@pytest.fixture(scope="module")
def ems_offline(workdir, model_dir):
    out = workdir / "ems_offline"
    run = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_ems", "--limit", "2",
                   "--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}", "--metadata", ems_metadata(judge="none"),
                   "--output_path", out], env=env_with(LM_EVAL_FIN_CACHE=workdir / "ems_offline.sqlite")).check()
    figures.record("run fin_ems offline: wall (s)", f"{run.wall_s:.0f}")
    figures.record("run fin_ems offline: peak RSS (GiB)", f"{run.max_rss / GIB:.2f} (one engine, in-process)")
    return run, out


@pytest.fixture(scope="module")
def ems_judged(workdir, model_dir, judge_spec):
    out = workdir / "ems_judged"
    run = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_ems", "--limit", "2",
                   "--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}",
                   "--metadata", ems_metadata(extract_max_tokens=24, max_attempts=1),
                   "--judge", judge_spec, *JUDGE_FLAGS, "--output_path", out],
                  env=env_with(LM_EVAL_FIN_CACHE=workdir / "ems_judged.sqlite")).check()
    figures.record("run fin_ems + vllm judge in-harness: wall (s)", f"{run.wall_s:.0f}")
    figures.record("run fin_ems + vllm judge in-harness: peak RSS (GiB)",
                   f"{run.max_rss / GIB:.2f} (model engine, then judge engine, in-process)")
    starts = figures.judge_engine_starts(run.stderr)
    figures.record("judge engine start, in lm-eval-fin run (s)", ", ".join(f"{s:.1f}" for s in starts))
    return run, out


def test_fin_agentbench_doc_and_chunk(workdir, model_dir):
    out = workdir / "agentbench"
    run = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_agentbench_doc,fin_agentbench_chunk",
                   "--limit", "2", "--metadata", json.dumps({"data_path": str(paths.data_path("finagentbench_demo"))}),
                   "--output_path", out, "--log_samples"]).check()
    figures.record("run fin_agentbench doc+chunk: wall (s)", f"{run.wall_s:.0f}")
    assert "Initializing a V1 LLM engine" in run.output  # the generations came from vLLM
    in_unit_range(results_of(out, "fin_agentbench_doc"), "ndcg@5", "map@5", "mrr@5", "parse_failure")
    in_unit_range(results_of(out, "fin_agentbench_chunk"), "ndcg@10", "map@10", "mrr@10", "parse_failure")
    for task in ("fin_agentbench_doc", "fin_agentbench_chunk"):
        samples = [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        assert len(samples) == 2 and all(isinstance(s["resps"][0][0], str) for s in samples)


def test_fin_ems_offline(ems_offline):
    run, out = ems_offline
    results = results_of(out, "fin_ems")
    in_unit_range(results, "bleu", "bertscore_f1", "rouge_l_f1", *(
        f"ems_offline_{scorer}_{part}" for scorer in ("rouge", "bertscore") for part in ("precision", "recall", "f1")))
    assert not any(key.startswith(("ems_llm", "ems_judge")) for key in results)
    assert "vLLM judge" not in run.stderr  # no judge, no judge engine


def test_fin_ems_judged_in_harness_holds_one_engine_at_a_time(ems_judged, ems_offline):
    run, out = ems_judged
    results = results_of(out, "fin_ems")
    in_unit_range(results, "bleu", "bertscore_f1", *(
        f"ems_{scorer}_{part}" for scorer in ("llm", "rouge", "bertscore") for part in ("precision", "recall", "f1")))
    assert results["ems_judge_model_calls,none"] > 0 and results["ems_judge_completion_tokens,none"] > 0
    # the judge engine starts once, after the model under test's engine was shut down, and is
    # released before the process ends
    log = run.stderr
    assert log.count("vLLM judge: starting an engine") == 1
    parked = log.index("shut down the engine of the model under test")
    assert parked < log.index("vLLM judge: starting an engine") < log.index("vLLM judge: released the engine")
    # the memory says the same: this run's peak is the offline run's (one engine) plus less
    # than one engine (a 1 GiB KV cache and 0.5 GiB of float32 weights), not plus a second one
    offline_run, _ = ems_offline
    assert run.max_rss - offline_run.max_rss < 1 * GIB, (run.max_rss / GIB, offline_run.max_rss / GIB)


def test_fin_lfqa_judged_in_harness_with_engine_processes(workdir, model_dir, judge_spec, lfqa_data):
    """vLLM's default: each engine in processes of its own. At most one engine-core process is
    alive at any time, two were started (model, judge), and none outlives the run."""
    out = workdir / "lfqa_judged"
    metadata = {"data_path": str(lfqa_data), "bertscore_model": "offline", "judge_max_tokens": 48}
    run = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_lfqa", "--confirm_run_unsafe_code", "--limit", "2",
                   "--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}", "--metadata", json.dumps(metadata),
                   "--judge", judge_spec, *JUDGE_FLAGS, "--output_path", out],
                  env=env_with(VLLM_ENABLE_V1_MULTIPROCESSING=1, LM_EVAL_FIN_CACHE=workdir / "lfqa.sqlite")).check()
    figures.record("run fin_lfqa + vllm judge, engine processes: wall (s)", f"{run.wall_s:.0f}")
    figures.record("run fin_lfqa + vllm judge, engine processes: peak RSS (GiB)",
                   f"{run.tree_rss_peak / GIB:.2f} (sum over the process tree, sampled)")
    starts = figures.judge_engine_starts(run.stderr)
    figures.record("judge engine start, engine processes (s)", ", ".join(f"{s:.1f}" for s in starts))
    results = results_of(out, "fin_lfqa")
    in_unit_range(results, "numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l", "code_exec_rate",
                  "bertscore_f1", "parse_failure", "judge_parse_failure")
    assert (results["judge_skipped,none"], results["judge_failure,none"]) == (0.0, 0.0)
    # the judge's JSON schema is enforced, so every verdict parses: three scores of 1..5
    assert results["judge_parse_failure,none"] == 0.0
    assert 3.0 <= results["judge_score,none"] <= 15.0
    assert (run.engine_cores_peak, len(run.engine_cores_seen)) == (1, 2)
    assert run.leftovers == []


@pytest.fixture(scope="module")
def predictions(workdir, model_dir, lfqa_data):
    """Stage one: generations only (``--predict_only``) for fin_ems and fin_lfqa, no judge."""
    root = workdir / "stage1"
    ems = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_ems", "--limit", "2", "--predict_only",
                   "--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}", "--metadata", ems_metadata(extract_max_tokens=24, max_attempts=1),
                   "--output_path", root / "ems", "--log_samples"]).check()
    lfqa = run_cli(["run", *model_flags(model_dir), "--tasks", "fin_lfqa", "--limit", "2", "--predict_only",
                    "--confirm_run_unsafe_code", "--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}",
                    "--metadata", json.dumps({"data_path": str(lfqa_data), "bertscore_model": "offline"}),
                    "--output_path", root / "lfqa", "--log_samples"]).check()
    for run in (ems, lfqa):
        assert "vLLM judge" not in run.stderr
    figures.record("run --predict_only fin_ems, fin_lfqa: wall (s)", f"{ems.wall_s:.0f}, {lfqa.wall_s:.0f}")
    return root


def test_two_stage_score_with_a_vllm_judge(predictions, judge_spec, workdir, monkeypatch, capsys):
    """Stage two, ``lm-eval-fin score DIR --judge vllm:...`` (in this process: it shares the
    process, not an engine, with the other tests): both runs judged by one engine, released
    when the command returns; a second ``score`` answers everything from the cache."""
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(workdir / "score.sqlite"))
    argv = ["score", str(predictions), "--judge", judge_spec, *JUDGE_FLAGS]
    assert cli.main(argv) == 0
    assert vllm_backend.current_engine() is None
    judged = {}
    for path in predictions.rglob("judged_results_*.json"):
        document = json.loads(path.read_text())
        judged.update({task: (document["results"][task], document["judge"]) for task in document["results"]})
    assert set(judged) == {"fin_ems", "fin_lfqa"}
    ems, ems_judge = judged["fin_ems"]
    in_unit_range(ems, *(f"ems_llm_{part}" for part in ("precision", "recall", "f1")))
    assert ems_judge["spec"] == judge_spec and ems_judge["stats"]["fin_ems"]["model_calls"] > 0
    lfqa, lfqa_judge = judged["fin_lfqa"]
    assert lfqa["judge_failure,none"] == 0.0 and lfqa["judge_parse_failure,none"] == 0.0
    assert 3.0 <= lfqa["judge_score,none"] <= 15.0
    assert lfqa_judge["stats"]["fin_lfqa"]["model_calls"] == 2
    capsys.readouterr()

    assert cli.main(argv) == 0  # warm: the same judge requests
    again = {}
    for path in predictions.rglob("judged_results_*.json"):
        document = json.loads(path.read_text())
        again.update({task: document["judge"]["stats"][task] for task in document["results"]})
    assert {task: stats["model_calls"] for task, stats in again.items()} == {"fin_ems": 0, "fin_lfqa": 0}
    assert vllm_backend.current_engine() is None


def model_calls_logged(caplog) -> list[int]:
    return [int(m) for m in re.findall(r"(\d+) model calls", caplog.text)]


def test_rerank_with_a_vllm_judge_on_the_shipped_chunk_sample(workdir, judge_spec, monkeypatch, capsys, caplog):
    """``lm-eval-fin rerank --judge vllm:...`` (FinCARDS, full pipeline) on the demo's chunk
    file, in this process; then again, every judge answer from the cache and no engine built."""
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(workdir / "rerank.sqlite"))
    out = workdir / "rerank.jsonl"
    argv = ["rerank", "--data", str(paths.data_path("finagentbench_demo")), "--judge", judge_spec,
            "--judge-max-tokens", "24", "--judge-max-model-len", "4096", "--max-attempts", "1",
            "--limit", "2", "--variant", "full", "--out", str(out)]
    caplog.set_level(logging.INFO, logger="lm_eval_fin.judge")
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert sum(model_calls_logged(caplog)) > 0 and caplog.text.count("vLLM judge: starting an engine") == 1
    assert vllm_backend.current_engine() is None  # the command closed its judge
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["variant"] for r in records] == ["full", "full"]
    for record in records:
        assert sorted(record["ranking"]) == list(range(len(record["ranking"])))
        assert all(0.0 <= record["scores"][m] <= 1.0 for m in ("ndcg", "map", "mrr"))
    cards = [line for line in first.splitlines() if line.startswith("cards:")]
    assert cards and "(0 cached)" in cards[0] and not cards[0].startswith("cards: 0 ")

    caplog.clear()
    assert cli.main(argv) == 0
    second = capsys.readouterr().out
    assert model_calls_logged(caplog) and not any(model_calls_logged(caplog))
    assert "vLLM judge: starting an engine" not in caplog.text
    assert [json.loads(line)["ranking"] for line in out.read_text().splitlines()] == [r["ranking"] for r in records]
    (cards_again,) = [line for line in second.splitlines() if line.startswith("cards:")]
    calls = int(cards_again.split(" calls (")[0].rsplit(" ", 1)[1])
    assert f"({calls} cached)" in cards_again  # every card call answered by the cache
    assert vllm_backend.current_engine() is None
