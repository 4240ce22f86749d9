"""FinCARDS: stage-1 speed and the LLM cost of each variant, on a synthetic 300-chunk filing.

1. Stage 1 (BM25 within a filing, 300 chunks x 40 questions): ours (bm25s, the filing indexed
   once) vs a plain-Python Okapi BM25 with the public code's formula, fitted per question as
   that code does, same tokens; the note gives how many of the 40 candidate lists agree.
2. Judge calls per query of every variant with an instant stand-in judge (it keeps BM25
   order, so the tournament converges as early as the stop rule allows): the figure the
   paper's cost discussion turns on. Peer for the card-based variants: the same pipeline if
   cards were written per query instead of once per chunk.
3. Judge calls per query of the full pipeline under the Table 3 strategies (single round,
   fixed grouping, mean-rank and voting aggregation, no early stop), same judge; peer: the
   default bootstrap with early stop.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections import Counter

N_CHUNKS = 300
N_QUESTIONS = 40
WORDS = (
    "revenue income margin cash flow segment pumps water debt notes dividend share repurchase "
    "supplier risk guidance quarter fiscal year growth decline cost steel copper tax rate "
    "employees litigation lease goodwill impairment inventory backlog orders europe america"
).split()


def make_filing(seed: int = 0) -> tuple[dict[int, str], list[str]]:
    rng = random.Random(seed)
    chunks = {
        i: " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) + f" {rng.randint(2019, 2025)}"
        for i in range(N_CHUNKS)
    }
    questions = [" ".join(rng.sample(WORDS, 5)) for _ in range(N_QUESTIONS)]
    return chunks, questions


def plain_bm25_order(question: str, chunks: dict[int, str], k1: float = 1.5, b: float = 0.75) -> list[int]:
    """Okapi BM25 with Lucene idf over Counter term frequencies, one question at a time."""
    from lm_eval_fin.rerank.bm25 import tokenize

    ids = sorted(chunks)
    docs = [Counter(tokenize(chunks[i])) for i in ids]
    lengths = [sum(d.values()) for d in docs]
    avgdl = sum(lengths) / len(lengths)
    df = Counter(term for d in docs for term in d)
    idf = {t: math.log((len(docs) - n + 0.5) / (n + 0.5) + 1.0) for t, n in df.items()}
    scores = {}
    for i, doc, length in zip(ids, docs, lengths):
        total = 0.0
        for term in tokenize(question):
            tf = doc.get(term, 0)
            if tf:
                total += idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
        scores[i] = total
    return sorted(scores, key=lambda i: (-scores[i], i))


class OrderKeepingJudge:
    """Answers instantly: cards and intents with fixed fields, selections in the order the
    candidates were shown (BM25 order), stage-3 rankings by chunk id (one fixed preference,
    so a tournament converges as early as its stop rule allows), the llm baseline in the
    order shown."""

    spec = "bench:order-keeping"

    def complete(self, requests, desc="judge"):
        from lm_eval_fin.judge import JudgeResponse

        return [JudgeResponse(self._answer(r), prompt_tokens=len(r.messages[-1]["content"]) // 4) for r in requests]

    @staticmethod
    def _answer(request):
        kind = request.json_schema["title"]
        content = request.messages[-1]["content"]
        ids = [int(x) for x in re.findall(r"^\[(?:Chunk Index )?(\d+)\]", content, re.MULTILINE)]
        if kind == "fincards_core_card":
            return json.dumps({"topic": "Revenue", "metrics": ["revenue"], "summary": content[7:60], "numeric_spans": []})
        if kind == "fincards_intent":
            return json.dumps({"relation": "lookup", "metrics": ["revenue"]})
        if kind == "fincards_screening":
            low = int(re.search(r"Keep between (\d+)", content).group(1))
            return json.dumps({"selected": [{"id": i, "score": 90 - n, "reason": ""} for n, i in enumerate(ids[:low])]})
        if kind == "fincards_ranking":
            return json.dumps({"ranking": sorted(ids)})
        return json.dumps({"ranking": ids})


def run() -> list[dict]:
    import bm25s  # noqa: F401  (its import, about 0.4 s once per process, is not BM25 work)

    from lm_eval_fin.rerank import VARIANTS, FinCardsConfig, Query, run_fincards
    from lm_eval_fin.rerank.bm25 import FilingIndex, bm25_stage, candidate_count

    chunks, questions = make_filing()
    k = candidate_count(len(chunks))

    start = time.perf_counter()
    index = FilingIndex(chunks)
    ours = [bm25_stage(q, chunks, index=index).candidates for q in questions]
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    plain = [tuple(plain_bm25_order(q, chunks)[:k]) for q in questions]
    plain_s = time.perf_counter() - start
    same = sum(a == b for a, b in zip(ours, plain))
    rows = [
        {
            "figure": f"FinCARDS stage 1, {N_CHUNKS}-chunk filing x {N_QUESTIONS} questions (s)",
            "ours": ours_s,
            "peer": plain_s,
            "ratio": ours_s / plain_s,
            "unit": "s",
            "note": f"ours indexes the filing once; peer: plain-Python Okapi BM25 fitted per question as in "
            f"the public code; identical top-{k} lists {same}/{N_QUESTIONS}",
        }
    ]

    queries = [Query(f"q{i}", q, chunks, None) for i, q in enumerate(questions[:10])]
    run_result = run_fincards(queries, OrderKeepingJudge(), VARIANTS, FinCardsConfig())
    card_calls = run_result.card_cost.calls / len(queries)
    per_query_cards = k  # the cards a per-query pipeline would write for its own candidates
    for variant in VARIANTS:
        calls = [r.cost["calls"] for r in run_result.results if r.variant == variant]
        ours_calls = sum(calls) / len(calls)
        peer = ours_calls - card_calls + per_query_cards if variant in ("s1+s3", "s1+s2", "full") else None
        rows.append(
            {
                "figure": f"FinCARDS judge calls per query, {variant} ({len(queries)} queries, one filing)",
                "ours": ours_calls,
                "peer": peer,
                "ratio": ours_calls / peer if peer else None,
                "unit": "calls",
                "note": "peer: cards written per query instead of once per chunk" if peer else "no cards",
            }
        )
    default = _full_calls(queries, FinCardsConfig())
    strategies = {
        "single round": {"max_rounds": 1}, "fixed grouping": {"regroup": False},
        "mean-rank aggregation": {"aggregation": "mean_rank"}, "voting aggregation": {"aggregation": "votes"},
        "no early stop": {"early_stop": False},
    }
    for name, changes in strategies.items():
        calls = _full_calls(queries, FinCardsConfig(**changes))
        rows.append(
            {
                "figure": f"FinCARDS judge calls per query, full, {name} ({len(queries)} queries)",
                "ours": calls,
                "peer": default,
                "ratio": calls / default,
                "unit": "calls",
                "note": "peer: the default bootstrap (random regrouping, Borda, Jaccard stop)",
            }
        )
    return rows


def _full_calls(queries, config) -> float:
    from lm_eval_fin.rerank import run_fincards

    results = run_fincards(queries, OrderKeepingJudge(), ("full",), config).results
    return sum(r.cost["calls"] for r in results) / len(results)


if __name__ == "__main__":
    for row in run():
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        peer = f"{row['peer']:.4g}" if row["peer"] is not None else "-"
        print(f"{row['figure']}: ours {row['ours']:.4g} {row['unit']}, peer {peer}, ratio {ratio} ({row['note']})")
