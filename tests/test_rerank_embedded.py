"""FinCARDS with the embedded SmolLM2-135M as judge: every variant runs on CPU, a fixed seed
reproduces the rankings, and ``lm-eval-fin rerank`` works end to end in a subprocess.

A 135M model writes few usable cards or rankings; these tests check the mechanics (requests
go out, answers are parsed or fall back, costs are booked, rankings are complete), not the
quality. Answers are capped at 24 tokens and asked once, and the CLI run reuses the judge
cache of the in-process run, so it makes no model call at all.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks.fin_agentbench.queries import queries_from_records
from lm_eval_fin.judge import JudgeOptions, load_judge
from lm_eval_fin.rerank import VARIANTS, FinCardsConfig, run_fincards
from tests.fincards_fixtures import FILING, filing_records, write_filing

MAX_TOKENS = 24
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def fincards_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("fincards") / "judge.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LM_EVAL_FIN_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def one_torch_thread():
    # Two torch threads on two cores shared with other test processes run several times
    # slower than one: keep the model to one thread while this module runs.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def two_runs(fincards_cache, embedded_judge_spec, one_torch_thread):
    queries = queries_from_records(filing_records())
    config = FinCardsConfig(max_tokens=MAX_TOKENS, max_attempts=1, seed=0)
    judge = load_judge(embedded_judge_spec, JudgeOptions(max_tokens=MAX_TOKENS))
    first = run_fincards(queries, judge, VARIANTS, config)
    calls = judge.stats.model_calls
    second = run_fincards(queries, judge, VARIANTS, config)
    return first, second, calls, judge.stats.model_calls - calls


def test_every_variant_runs_with_the_embedded_judge(two_runs):
    first, _, calls, _ = two_runs
    assert calls > 0
    assert {r.variant for r in first.results} == set(VARIANTS)
    for result in first.results:
        assert sorted(result.ranking) == list(range(len(FILING)))
        assert all(0.0 <= result.scores[m] <= 1.0 for m in ("ndcg", "map", "mrr"))
        assert (result.cost["calls"] > 0) == (result.variant != "bm25")
        assert (result.rank_variance is not None) == (result.variant in ("s1+s3", "full"))
        # a local model always answers: unreadable answers fall back, nothing fails
        assert result.judge.status in ("ok", "fallback") and result.judge.failed == 0
    assert set(first.stages) == {"cards", "intent", "llm", "screening", "tournament"}
    assert first.stages["cards"].requests == len(FILING) == first.distinct_chunks
    assert all(c.cost.calls >= c.requests for c in first.stages.values())  # re-asks add calls
    assert all(c.failed == 0 and 0 <= c.unparsed <= c.requests for c in first.stages.values())
    full = next(r for r in first.results if r.variant == "full")
    assert {"stage1", "intent", "quotas", "stage2", "stage3", "final"} <= set(full.audit)


def test_a_fixed_seed_reproduces_the_rankings_from_the_cache(two_runs):
    first, second, _, new_calls = two_runs
    assert [r.ranking for r in second.results] == [r.ranking for r in first.results]
    assert new_calls == 0  # the same requests again: every answer from the cache


def test_cli_end_to_end(two_runs, fincards_cache, embedded_judge_spec, tmp_path):
    first = two_runs[0]
    data = write_filing(tmp_path / "chunk_ranking_fixture.jsonl")
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "LM_EVAL_FIN_CACHE": str(fincards_cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [BIN / "lm-eval-fin", "rerank", "--data", str(data), "--judge", embedded_judge_spec,
         "--judge_max_tokens", str(MAX_TOKENS), "--max_attempts", "1", "--variant", "all",
         "--seed", "0", "--out", str(out), "--judge_retry_unparsable", "no"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    # a 135M model leaves answers unreadable: the command says so and exits 1 (0 if none were)
    assert done.returncode == (1 if first.unparsed else 0), done.stderr[-3000:]
    if first.unparsed:
        assert done.stderr.strip().splitlines()[-1].startswith(f"lm-eval-fin rerank: {first.unparsed} answers stayed")
    table = done.stdout.splitlines()
    assert table[3].split()[:7] == ["variant", "nDCG@10", "MAP@10", "MAPh@10", "MRR@10", "S1", "cand"]
    assert [line.split()[0] for line in table[4:9]] == list(VARIANTS)
    assert "cards: 6 distinct chunks" in done.stdout
    stage_lines = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert stage_lines == ["cards", "intent", "llm", "screening", "tournament"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["variant"], r["ranking"]) for r in records] == [
        (r.query_id, r.variant, r.ranking) for r in first.results
    ]
    # same seed, same requests, in another process: every answer came from the cache
    calls = [int(n) for n in re.findall(r"(\d+) model calls", done.stderr)]
    assert calls and not any(calls)
