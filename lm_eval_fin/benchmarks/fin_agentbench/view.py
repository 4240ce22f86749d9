"""fin_agentbench in the report: the ranking read from each answer against the grades, baselines
that rank without a model, and the FinCARDS figures for the chunk task."""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench.prompt import parse_challenge_prompt
from lm_eval_fin.benchmarks.fin_agentbench.score import gold_ranking, score_ranking
from lm_eval_fin.outputs.runfiles import Sample, as_float, run_settings
from lm_eval_fin.report.blocks import (
    HIT,
    NOTE,
    Baseline,
    Block,
    Cell,
    Reference,
    View,
    answer_block,
    facts_block,
    json_field,
    question_title,
    show,
    table_block,
    text_block,
)
from lm_eval_fin.rerank.bm25 import bm25_stage

RANDOM_SEED = 0


def _labels(doc: Mapping[str, Any]) -> dict[int, str]:
    return {int(k): str(v) for k, v in (json_field(doc, "labels", {}) or {}).items() if str(k).lstrip("-").isdigit()}


def _grades(doc: Mapping[str, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in (json_field(doc, "qrel", {}) or {}).items() if str(k).lstrip("-").isdigit()}


def question(sample: Sample) -> list[Block]:
    return [text_block("Question", question_title(sample.doc, limit=1000)),
            text_block("Prompt", str(sample.doc.get("prompt", "")))]


def answer(sample: Sample) -> list[Block]:
    """The ranking the task read from the answer (its record) against the graded order."""
    doc = sample.doc
    candidates = [c for c in doc.get("candidates") or [] if isinstance(c, int)]
    labels, grades = _labels(doc), _grades(doc)
    ranking = sample.record.get("ranking")
    ranking = [c for c in ranking if isinstance(c, int)] if isinstance(ranking, list) else None
    ideal = sorted(candidates, key=lambda c: -(as_float(grades.get(c)) or 0.0))
    blocks = [facts_block("", [
        ("ranking read", "none: a parse failure (scores 0)" if ranking is None else ", ".join(map(str, ranking))),
        ("graded order", ", ".join(f"{c} (grade {grades.get(c, 0)})" for c in ideal)),
    ])]
    order = list(ranking or []) + [c for c in candidates if c not in (ranking or [])]
    rows = []
    for c in order:
        grade = as_float(grades.get(c)) or 0.0
        ranked = ranking is not None and c in ranking
        rows.append([
            Cell(str(ranking.index(c) + 1) if ranked and ranking else "not ranked", "" if ranked else NOTE),
            Cell(f"{c}: {labels[c]}" if c in labels else f"Index {c}"),
            Cell(show(grades.get(c, 0)), HIT if grade >= 1 else ""),
            Cell(str(ideal.index(c) + 1)),
        ])
    blocks.append(table_block("The model's ranking against the graded candidates (green: relevant)",
                              ["model rank", "candidate", "grade", "graded rank"], rows))
    blocks.append(answer_block(sample))
    return blocks


# ------------------------------------------------------------------------------ baselines


def random_order(key: str, candidates: Sequence[int], seed: int = RANDOM_SEED) -> list[int]:
    """The candidates shuffled with a seed of their own per question (the same on every run)."""
    order = list(candidates)
    random.Random(zlib.crc32(f"{seed}:{key}".encode())).shuffle(order)
    return order


def bm25_order(doc: dict[str, Any]) -> list[int] | None:
    """The candidates in FinCARDS' stage-1 BM25 order of their texts in the prompt; None when no
    candidate shares a word with the question (document types are names, not texts)."""
    question_text, texts = parse_challenge_prompt(str(doc.get("prompt", "")))
    candidates = [c for c in doc.get("candidates") or [] if isinstance(c, int)]
    texts = {c: texts.get(c, "") for c in candidates}
    if not texts:
        return None
    stage = bm25_stage(question_text, texts)
    if not any(stage.scores.values()):
        return None
    return list(stage.order)


def baselines(task: str, samples: Sequence[Sample]) -> list[Baseline]:
    """Rankings made without a model, scored as the task scores a model's: the candidates in
    the order given (what an echo of the prompt scores), in a seeded random order, and in
    BM25 order where the candidates are texts (the chunk task)."""
    graded = [s for s in samples if s.doc.get("qrel")]
    if not graded:
        return []
    made: dict[str, dict[str, dict[str, float]]] = {"input order": {}, "random order": {}, "BM25": {}}
    for sample in graded:
        doc = sample.doc
        gain = (run_settings(doc).get("values") or {}).get("gain") or "exponential"
        candidates = [c for c in doc.get("candidates") or [] if isinstance(c, int)]
        made["input order"][sample.key] = score_ranking(doc, candidates, gain=gain)
        made["random order"][sample.key] = score_ranking(doc, random_order(sample.key, candidates), gain=gain)
        order = bm25_order(doc)
        if order is not None:
            made["BM25"][sample.key] = score_ranking(doc, order, gain=gain)
    descriptions = {
        "input order": "the candidates in the order the prompt lists them (what echoing the list scores)",
        "random order": f"the candidates shuffled, seed {RANDOM_SEED} per question",
        "BM25": "FinCARDS' stage 1: BM25 of each candidate's text against the question (lm_eval_fin.rerank)",
    }
    return [Baseline(name, descriptions[name], values) for name, values in made.items() if values]


def best_document_type(doc: Mapping[str, Any]) -> str | None:
    """The document type with the highest grade (the type the question needs), for the
    document task; None for chunks."""
    labels = _labels(doc)
    ranking = gold_ranking(dict(doc)) if doc.get("qrel") and labels else []
    return labels.get(ranking[0]) if ranking else None


# FinCARDS Table 1, FinAgentBench intra-document chunk ranking, scores / 100. Its MAP@10 is
# map_hits@10 (tasks/fin_agentbench/README.md, "Scoring"); FinAgentBench's own tables, whose MAP
# is map@k, are not among the paper texts this project keeps, so none of their rows is here.
_FINCARDS = "FinCARDS (Zhou et al. 2026), Table 1"
_SPLIT = "FinAgentBench 10-K/10-Q chunk ranking, the paper's queries (not the shipped demo)"
_GAIN = "nDCG gain not stated in the paper"
_POOL = (
    "reranks the paper's BM25 stage-1 pool (its Table 1 gives 25 candidates, its text 'roughly 100'; this project's "
    f"stage 1 keeps clamp(ceil(L/2), 60, 150) of a filing's L chunks, after the public code); {_GAIN}"
)
REFERENCES = (
    Reference(_FINCARDS, "BM25", "stage 1 only", _SPLIT, ("fin_agentbench_chunk",),
              {"ndcg@10": 0.4426, "map_hits@10": 0.6001, "mrr@10": 0.6988}, _GAIN),
    Reference(_FINCARDS, "GPT-5 mini", "zero-shot LLM reranking", _SPLIT, ("fin_agentbench_chunk",),
              {"ndcg@10": 0.5580, "map_hits@10": 0.6650, "mrr@10": 0.7820}, _POOL),
    Reference(_FINCARDS, "GPT-5 mini", "FinCARDS, stages 1+2+3", _SPLIT, ("fin_agentbench_chunk",),
              {"ndcg@10": 0.7158, "map_hits@10": 0.7869, "mrr@10": 0.8917}, _POOL),
)

VIEW = View(
    question=question,
    answer=answer,
    baselines=baselines,
    references=REFERENCES,
    references_note=(
        "FinCARDS' MAP@10 divides by the relevant chunks found in the top 10 and is shown under map_hits@10, not "
        "map@10 (trec_eval's map_cut, over every relevant chunk); its nDCG gain is not stated (ours: exponential "
        "unless gain=linear). FinAgentBench's own MAP (a co-author's evaluator) divides by every relevant candidate, "
        "with exponential gain: set its figures beside map@5, not map_hits@5 (none of its rows is shown here). No "
        "FinCARDS table is on the document task."
    ),
    subsets={"the document type the question needs": best_document_type},
)
