"""Issue 36: the facts the code states about the papers, pinned where the code and the READMEs
state them (the README lines below are the deviation tables' claims; a change to the code that
makes one false fails here)."""

import math
import random
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks.fin_agentbench import view as agentbench_view
from lm_eval_fin.benchmarks.fin_lfqa import view as lfqa_view
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.measures import textsim
from lm_eval_fin.measures.ranking import rank_metrics
from lm_eval_fin.plumbing import paths

ROOT = Path(__file__).resolve().parents[1]


def readme(task: str) -> str:
    return " ".join((paths.tasks_dir() / task / "README.md").read_text(encoding="utf-8").split())


# ------------------------------------------------------------------ MAP and gain, per paper


def _cutoff_evaluator(qrel: dict[str, int], ranking: list[int], k: int) -> tuple[float, float]:
    """nDCG@k and MAP@k as FinAgentBench's co-author evaluator defines them (MinjaeKimmm/
    FinAgentBenchRFT, base_eval.py), restated: gain 2^g - 1, ideal DCG over the query's k
    highest grades; MAP sums precision at each hit within k and divides by every candidate
    graded above 0."""
    top = ranking[:k]
    dcg = sum((2 ** qrel.get(str(c), 0) - 1) / math.log2(i + 2) for i, c in enumerate(top))
    ideal = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(sorted(qrel.values(), reverse=True)[:k]))
    relevant = {c for c, g in qrel.items() if g > 0}
    hits, precision_sum = 0, 0.0
    for i, candidate in enumerate(top):
        if str(candidate) in relevant:
            hits += 1
            precision_sum += hits / (i + 1)
    return (dcg / ideal if ideal else 0.0), (precision_sum / len(relevant) if relevant else 0.0)


def test_map_at_k_and_the_default_gain_are_finagentbenchs_evaluators():
    """FinAgentBench's MAP divides by every relevant candidate: our map@k, not map_hits@k;
    its nDCG gain is exponential: our default."""
    rng = random.Random(36)
    differs = 0
    for _ in range(300):
        n = rng.randint(5, 40)
        qrel = {str(c): rng.choice([0, 0, 0, 1, 2]) for c in range(n)}
        ranking = rng.sample(range(n), rng.randint(1, n))
        for k in (5, 10):
            ndcg, map_k = _cutoff_evaluator(qrel, ranking, k)
            ours = rank_metrics(ranking, qrel, k=k)
            assert ours["ndcg"] == pytest.approx(ndcg, abs=1e-12)
            assert ours["map"] == pytest.approx(map_k, abs=1e-12)
            differs += abs(ours["map_hits"] - map_k) > 1e-9
    assert differs > 50  # the two MAP conventions are different numbers on these queries


def test_the_challenge_teams_ndcg_is_linear_gain():
    """An ICAIF '25 team's evaluation.json, document query 0: ranking 4, 3, 1, 2, 0 with grades
    3, 2, 1 for documents 2, 1, 0 reports nDCG@5 0.5625706674958231: linear gain."""
    qrel = {"2": 3, "1": 2, "0": 1, "3": 0, "4": 0}
    assert rank_metrics([4, 3, 1, 2, 0], qrel, k=5, gain="linear")["ndcg"] == pytest.approx(0.5625706674958231)
    assert rank_metrics([4, 3, 1, 2, 0], qrel, k=5)["ndcg"] == pytest.approx(0.5218, abs=1e-4)


def test_paper_rows_compare_like_with_like():
    """FinCARDS' MAP@10 is map_hits@10: its rows never fill map@10; the notes say which MAP
    each paper's figures belong beside."""
    for reference in agentbench_view.REFERENCES:
        assert reference.paper.startswith("FinCARDS")
        assert set(reference.values) == {"ndcg@10", "map_hits@10", "mrr@10"}
        assert reference.values["map_hits@10"] > reference.values["ndcg@10"]  # as in every row of its tables
    note = agentbench_view.VIEW.references_note
    assert "FinAgentBench's own MAP" in note and "beside map@5, not map_hits@5" in note
    text = readme("fin_agentbench")
    assert "`map@k` (trec_eval's, over every relevant chunk) is FinAgentBench's" in text
    assert "`map_hits@k` (over the relevant chunks found in the top k) the one FinCARDS' tables imply" in text
    assert '("at rank 10", section 4.3)' in text  # FinCARDS' section 4.3, Evaluation Measures
    assert "Neither FinAgentBench's scoring code" not in text  # a co-author's evaluator is public


# ------------------------------------------------------------------ text metrics and decoding


def test_baseline_rouge_does_not_stem_as_the_readmes_say():
    # "revenues" against "revenue": a stemmer would match them
    assert textsim.rouge_l(["revenues rose"], ["revenue rose"])[0][2] == pytest.approx(0.5)
    assert textsim.rouge_l(["revenues rose"], ["revenue rose"], use_stemmer=True)[0][2] == pytest.approx(1.0)
    assert "ROUGE-L F1 without stemming" in readme("fin_lfqa")
    assert "ROUGE-L P / R / F1 of the whole answer, rouge-score's tokenizer, no stemming" in readme("fin_ems")


def test_bertscore_cut_is_stated_where_the_model_reads_512_tokens():
    scorer = textsim.load_bert_scorer("offline")
    assert scorer._tokenizer.model_max_length == 512
    assert "at most 512 tokens a side" in readme("fin_ems") and "at most 512 tokens a side" in readme("fin_lfqa")


def test_decoding_defaults_are_the_tables():
    ems = taskfiles.task_config("fin_ems")["generation_kwargs"]
    assert (ems["do_sample"], ems["max_gen_toks"]) == (False, 1024)
    assert "greedy (`do_sample: false`), `max_gen_toks` 1024" in readme("fin_ems")
    lfqa = taskfiles.task_config("fin_lfqa")["generation_kwargs"]
    assert (lfqa["do_sample"], lfqa["max_gen_toks"]) == (False, 2048)
    assert "deviates: greedy by default; 2048; zero-shot" in readme("fin_lfqa")


def test_finlfqa_rows_say_how_code_execution_is_averaged():
    note = lfqa_view.VIEW.references_note
    assert "Every column follows" not in note and "where the paper counts all snippets (section 4.3)" in note
    assert all("ours is the per-answer mean" in reference.note for reference in lfqa_view.REFERENCES)


def test_no_readme_calls_roberta_large_the_papers_model():
    for text in (ROOT / "README.md", ROOT / "tasks/fin_ems/README.md", ROOT / "tasks/fin_lfqa/README.md"):
        assert "the papers' model" not in text.read_text(encoding="utf-8")
