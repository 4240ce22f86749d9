"""Ranking metrics on 10,000 queries x 100 candidates: ours vs pytrec_eval, same inputs, same run.

Prints the wall time of each, their ratio, and the largest difference between the values
(linear gain, where trec_eval's definitions and ours coincide).
"""

from __future__ import annotations

import random
import time

N_QUERIES = 10_000
N_CANDIDATES = 100
K = 10


def make_queries(seed: int = 0):
    rng = random.Random(seed)
    queries = []
    for q in range(N_QUERIES):
        docs = [f"d{i}" for i in range(N_CANDIDATES)]
        qrel = {d: rng.choice((0, 0, 0, 1, 2)) for d in docs}
        rng.shuffle(docs)
        queries.append((f"q{q}", docs, qrel))
    return queries


def run() -> list[dict]:
    import pytrec_eval

    from lm_eval_fin.measures.ranking import rank_metrics

    queries = make_queries()

    start = time.perf_counter()
    ours = {qid: rank_metrics(ranking, qrel, k=K, gain="linear") for qid, ranking, qrel in queries}
    ours_s = time.perf_counter() - start

    start = time.perf_counter()
    qrels = {qid: qrel for qid, _, qrel in queries}
    runs = {qid: {d: float(N_CANDIDATES - i) for i, d in enumerate(ranking)} for qid, ranking, _ in queries}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{K}", f"map_cut.{K}"})
    theirs = evaluator.evaluate(runs)
    peer_s = time.perf_counter() - start

    max_diff = max(
        max(abs(ours[q]["ndcg"] - theirs[q][f"ndcg_cut_{K}"]), abs(ours[q]["map"] - theirs[q][f"map_cut_{K}"]))
        for q in ours
    )
    return [
        {
            "figure": f"ranking metrics, {N_QUERIES:,} queries x {N_CANDIDATES} candidates (s)",
            "ours": ours_s,
            "peer": peer_s,
            "ratio": ours_s / peer_s,
            "unit": "s",
            "note": f"peer: pytrec_eval (incl. building its dicts); max |diff| {max_diff:.1e}",
        }
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
