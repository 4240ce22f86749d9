"""FinLFQA's non-LLM metrics on 1,000 synthetic answers: ours vs peers, same inputs, same run.

Scored per answer, as the task's process_results does: parse the attributed answer, numeric
P/R/F1, evidence P/R/F1, knowledge recall, ROUGE-L. Goal: under 5 s for 1,000 answers on two
cores. BERTScore (a model) and code execution (covered by the sandbox's own benchmark) are
not in it.

Peers: rouge-score's ``RougeScorer(["rougeL"])`` (evaluate's own ``rouge`` module wraps it
and is not loadable offline) for ROUGE-L, and a direct pairwise implementation of the README's
matching rule (every answer value against every reference value under every scale factor)
for the numeric metric. Each row also checks that ours and the peer agree.
"""

from __future__ import annotations

import json
import math
import random
import time

N_ANSWERS = 1_000
COMPANIES = ("CWT", "AWK")
WORDS = (
    "net interest expense revenue margin rose fell compared with the prior quarter driven by "
    "higher short-term borrowings operating income liquidity capital spending ratio company "
    "reported increase decrease while its debt coverage remained stable"
).split()


def _clause(rng: random.Random, number: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(18, 40)))
    figures = [
        f"${rng.randint(10, 999)}.{rng.randint(0, 9)} million",
        f"{rng.uniform(-30, 30):.2f}%",
        f"{rng.randint(1, 9)},{rng.randint(100, 999)} thousand",
        f"({rng.uniform(0, 5):.1f})",
    ]
    evidence = "; ".join(f"{c} {sorted(rng.sample(range(40), rng.randint(0, 3)))}" for c in COMPANIES)
    code = (
        "Code:\n```python\ndef value():\n"
        f"    return ({rng.randint(100, 200)} - {rng.randint(50, 99)}) / {rng.randint(50, 99)} * 100\n```"
        if rng.random() < 0.4 else "Code: none"
    )
    return (
        f"{number}. {words} {rng.choice(figures)} and {rng.choice(figures)}.\n"
        f"Evidence: {evidence}\n{code}\nKnowledge: {sorted(rng.sample(range(20), rng.randint(0, 2)))}"
    )


def make_documents(seed: int = 0) -> tuple[list[dict], list[str]]:
    """Task documents (reference clauses only; the reports do not enter these metrics) and
    one answer per document."""
    from lm_eval_fin.attribution import parse_answer

    rng = random.Random(seed)
    documents, answers = [], []
    for i in range(N_ANSWERS):
        reference = parse_answer("\n".join(_clause(rng, n) for n in range(1, rng.randint(2, 5))), COMPANIES)
        clauses = [
            {"text": c.text, "evidence": [list(p) for p in c.evidence], "code": list(c.code), "knowledge": list(c.knowledge)}
            for c in reference.clauses
        ]
        documents.append({
            "id": f"doc-{i}", "question": "How did they do?", "companies": list(COMPANIES),
            "reports": "", "knowledge": "", "reference_clauses": json.dumps(clauses),
            "has_reference": True, "scoring": "{}",
        })
        answers.append("\n".join(_clause(rng, n) for n in range(1, rng.randint(2, 6))))
    return documents, answers


def _pairwise_numeric_prf(predicted: list[float], reference: list[float]) -> tuple[float, float, float]:
    """The definition, written out: every value pair under every scale factor."""
    from lm_eval_fin.measures.numbers import RELATIVE_TOLERANCE, SCALE_FACTORS

    def match(a: float, b: float) -> bool:
        return any(math.isclose(a * f, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=0.0) for f in SCALE_FACTORS)

    predicted, reference = set(predicted), set(reference)
    if not predicted and not reference:
        return 1.0, 1.0, 1.0
    if not predicted or not reference:
        return 0.0, 0.0, 0.0
    p = sum(any(match(m, g) for g in reference) for m in predicted) / len(predicted)
    r = sum(any(match(m, g) for m in predicted) for g in reference) / len(reference)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def run() -> list[dict]:
    from rouge_score import rouge_scorer

    from lm_eval_fin.attribution import parse_answer
    from lm_eval_fin.benchmarks.fin_lfqa import data, score
    from lm_eval_fin.measures import numbers, textsim

    documents, answers = make_documents()
    score.score_document(documents[0], answers[0])  # imports and compiled patterns: once per process

    start = time.perf_counter()
    scores = [score.score_document(doc, answer)[0] for doc, answer in zip(documents, answers)]
    all_metrics_s = time.perf_counter() - start

    texts = [parse_answer(a, COMPANIES).text for a in answers]
    references = [data.reference_text(doc) for doc in documents]

    start = time.perf_counter()
    ours_rouge = textsim.rouge_l(texts, references)
    ours_rouge_s = time.perf_counter() - start
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    start = time.perf_counter()
    peer_rouge = [scorer.score(r, t)["rougeL"] for t, r in zip(texts, references)]
    peer_rouge_s = time.perf_counter() - start
    rouge_diff = max(abs(o[2] - p.fmeasure) for o, p in zip(ours_rouge, peer_rouge))

    extracted = [(numbers.extract_numbers(t), numbers.extract_numbers(r)) for t, r in zip(texts, references)]
    start = time.perf_counter()
    ours_numeric = [numbers.prf_of_values(m, g) for m, g in extracted]
    ours_numeric_s = time.perf_counter() - start
    start = time.perf_counter()
    peer_numeric = [_pairwise_numeric_prf(m, g) for m, g in extracted]
    peer_numeric_s = time.perf_counter() - start
    numeric_diff = max(abs(a - b) for o, p in zip(ours_numeric, peer_numeric) for a, b in zip(o, p))

    # The whole per-answer pass again with rouge-score in place of our ROUGE-L: what the
    # metrics would cost on the usual implementation.
    with_peer_rouge_s = all_metrics_s - ours_rouge_s + peer_rouge_s
    mean_f1 = sum(s["numeric_f1"] for s in scores) / len(scores)
    return [
        {
            "figure": f"FinLFQA non-LLM metrics except BERTScore and code execution, {N_ANSWERS:,} answers (s)",
            "ours": all_metrics_s, "peer": 5.0, "ratio": all_metrics_s / 5.0, "unit": "s",
            "note": "peer column: the goal (5 s on 2 cores); parse + numeric + evidence + knowledge + ROUGE-L "
                    f"per answer (process_results); mean numeric F1 {mean_f1:.3f}",
        },
        {
            "figure": "same, with rouge-score's ROUGE-L in place of ours (s)",
            "ours": all_metrics_s, "peer": with_peer_rouge_s, "ratio": all_metrics_s / with_peer_rouge_s,
            "unit": "s", "note": "peer: our pass minus our ROUGE-L plus rouge-score's, timed on the same texts",
        },
        {
            "figure": f"ROUGE-L, {N_ANSWERS:,} answer/reference pairs (s)",
            "ours": ours_rouge_s, "peer": peer_rouge_s, "ratio": ours_rouge_s / peer_rouge_s, "unit": "s",
            "note": f"peer: rouge_score.RougeScorer(['rougeL']); max |F1 diff| {rouge_diff:.1e}",
        },
        {
            "figure": f"numeric P/R/F1 matching, {N_ANSWERS:,} answers (s)",
            "ours": ours_numeric_s, "peer": peer_numeric_s, "ratio": ours_numeric_s / peer_numeric_s, "unit": "s",
            "note": f"peer: pairwise isclose over all values and scale factors; max |diff| {numeric_diff:.1e}",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
