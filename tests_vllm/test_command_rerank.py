"""``lm-eval-fin rerank --judge vllm:...`` (FinCARDS, full pipeline) on the shipped chunk
sample, called in this process (``lm_eval_fin.cli.main``: the console script's function; only
the process start is left out). The command builds its judge engine once and releases it
before it returns; run again, it answers everything from the cache and builds none. Run with
``VLLM_CPU_KVCACHE_SPACE`` unset: the command picks a KV-cache size that fits the free memory,
says so in one line, and the engine starts with it."""

from __future__ import annotations

import json
import logging
import re

from lm_eval_fin import cli
from lm_eval_fin.judge import vllm_backend
from lm_eval_fin.plumbing import paths
from lm_eval_fin.plumbing.vllm_memory import KV_ENV
from tests_vllm import figures
from tests_vllm.figures import STARTING, model_calls_logged


def test_rerank_on_the_shipped_chunk_sample(tmp_path, judge_spec, monkeypatch, capsys, caplog):
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(tmp_path / "rerank.sqlite"))
    monkeypatch.delenv(KV_ENV)  # conftest.py's 1 GiB comes back after the test
    caplog.set_level(logging.INFO, logger="lm_eval_fin.judge")
    out = tmp_path / "rerank.jsonl"
    argv = ["rerank", "--data", str(paths.data_path("finagentbench_demo")), "--judge", judge_spec,
            "--judge_max_tokens", "24", "--judge_max_model_len", "4096", "--max_attempts", "1",
            "--limit", "1", "--variant", "full", "--out", str(out)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    first = captured.out
    (sized,) = [line for line in captured.err.splitlines() if KV_ENV in line]
    assert re.fullmatch(rf"lm-eval-fin rerank: {KV_ENV} is unset; vLLM's KV cache takes (\d+) GiB \([\d.]+ GiB of "
                        rf"memory free\); set {KV_ENV} to choose", sized), sized
    figures.record("KV cache picked by lm-eval-fin rerank (VLLM_CPU_KVCACHE_SPACE unset)", sized.split("takes ")[1])
    assert caplog.text.count(STARTING) == 1 and sum(model_calls_logged(caplog.text)) > 0
    assert vllm_backend.current_engine() is None  # the command closed its judge: engine released
    starts = figures.judge_engine_starts(caplog.text)
    figures.record("judge engine start, lm-eval-fin rerank (s)", f"{starts[0]:.1f}")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["variant"] for r in records] == ["full"]
    for record in records:
        assert sorted(record["ranking"]) == list(range(len(record["ranking"])))
        assert all(0.0 <= record["scores"][m] <= 1.0 for m in ("ndcg", "map", "mrr"))
    (cards,) = [line for line in first.splitlines() if line.startswith("cards:")]
    assert "(0 cached)" in cards and not cards.startswith("cards: 0 ")

    caplog.clear()
    assert cli.main(argv) == 0  # again: the same requests
    capsys.readouterr()
    calls = model_calls_logged(caplog.text)
    assert calls and not any(calls) and STARTING not in caplog.text
    assert [json.loads(line)["ranking"] for line in out.read_text().splitlines()] == [r["ranking"] for r in records]
