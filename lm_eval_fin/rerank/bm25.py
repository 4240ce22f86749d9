"""Stage 1 of FinCARDS: BM25 within one filing, with a length-adaptive candidate count.

FinCARDS ranks the chunks of the one filing the question is about, so BM25 statistics (idf,
average length) come from that filing's chunks alone, as in the paper and its public code.

* Tokens: lowercase ``\\w+`` runs, no stop words and no stemming (the public code's
  tokenizer; bm25s's own default would drop one-letter tokens and English stop words).
* Scoring: bm25s with k1 = 1.5, b = 0.75 and Lucene's idf ``log(1 + (N - df + 0.5) /
  (df + 0.5))``, the formula of the public code. bm25s's Lucene variant leaves out the
  constant ``(k1 + 1)`` factor of the term weight, which scales every score alike and so
  changes no ranking. A repeated query word counts once per occurrence, as in the code.
* Candidates: K = clamp(ceil(0.5 * L), 60, 150) for a filing of L chunks (all chunks when
  L < K). Equal scores keep document order (the chunk index), so the cut is deterministic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

K1 = 1.5
B = 0.75
CANDIDATE_RATIO = 0.5
MIN_CANDIDATES = 60
MAX_CANDIDATES = 150

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens.

    >>> tokenize("Revenue rose 8.2% in FY2025")
    ['revenue', 'rose', '8', '2', 'in', 'fy2025']
    """
    return _WORD.findall(text.lower())


def candidate_count(
    n_chunks: int,
    ratio: float = CANDIDATE_RATIO,
    minimum: int = MIN_CANDIDATES,
    maximum: int = MAX_CANDIDATES,
) -> int:
    """K = clamp(ceil(ratio * L), minimum, maximum), never more than the L chunks there are.

    >>> [candidate_count(n) for n in (10, 100, 121, 250, 301, 1000)]
    [10, 60, 61, 125, 150, 150]
    """
    if n_chunks <= 0:
        return 0
    wanted = max(minimum, min(math.ceil(ratio * n_chunks), maximum))
    return min(wanted, n_chunks)


class FilingIndex:
    """A BM25 index over one filing's chunks, built once and shared by every question on it."""

    def __init__(self, chunks: Mapping[int, str], k1: float = K1, b: float = B):
        self.indices = sorted(chunks)
        corpus = [tokenize(chunks[i]) for i in self.indices]
        self._retriever = None
        if any(corpus):
            import bm25s

            self._retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
            self._retriever.index(corpus, show_progress=False)

    def scores(self, question: str) -> dict[int, float]:
        """BM25 score of every chunk for ``question`` (chunk index -> score)."""
        retriever = self._retriever
        known = [] if retriever is None else [token for token in tokenize(question) if token in retriever.vocab_dict]
        if retriever is None or not known:
            return {i: 0.0 for i in self.indices}
        return {i: float(s) for i, s in zip(self.indices, retriever.get_scores(known))}


def order_by_score(scores: Mapping[int, float]) -> list[int]:
    """Chunk indices by descending score; equal scores keep document order.

    >>> order_by_score({0: 1.0, 1: 2.5, 2: 1.0, 3: 0.0})
    [1, 0, 2, 3]
    """
    return sorted(scores, key=lambda i: (-scores[i], i))


@dataclass(frozen=True)
class Stage1:
    """The BM25 stage of one query: every chunk in BM25 order and the first K of them."""

    order: tuple[int, ...]
    scores: Mapping[int, float]
    candidates: tuple[int, ...]

    @property
    def rank(self) -> dict[int, int]:
        """1-based BM25 rank of every chunk (the tie-breaker of the later stages)."""
        return {idx: position for position, idx in enumerate(self.order, start=1)}


def bm25_stage(
    question: str,
    chunks: Mapping[int, str],
    k1: float = K1,
    b: float = B,
    ratio: float = CANDIDATE_RATIO,
    minimum: int = MIN_CANDIDATES,
    maximum: int = MAX_CANDIDATES,
    index: FilingIndex | None = None,
) -> Stage1:
    """Stage 1 of one query; pass the filing's ``index`` to reuse it across questions."""
    scores = (index or FilingIndex(chunks, k1=k1, b=b)).scores(question)
    order = order_by_score(scores)
    count = candidate_count(len(order), ratio=ratio, minimum=minimum, maximum=maximum)
    return Stage1(order=tuple(order), scores=scores, candidates=tuple(order[:count]))
