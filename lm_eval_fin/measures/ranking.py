"""Ranking metrics (nDCG@k, MAP@k in two conventions, MRR@k) and tolerant parsing of a model's ranking.

The definitions (README, "Metric definitions"):

* relevant means grade >= 1, for every metric and fractional grades included: a candidate
  graded below 1 (0.5, say) is not relevant and brings no gain;
* nDCG@k: DCG = sum_{i=1..k} gain(grade_i) / log2(i + 1), divided by the DCG of all relevant
  candidates of the query sorted by grade and cut at k; gain is ``2**g - 1`` (exponential,
  the default) or ``g`` (linear, trec_eval's ndcg_cut) for a relevant candidate, 0 for any
  other; a query with no relevant item scores 0;
* MAP@k (``map``): the sum of precision@i over the relevant ranks i <= k, divided by the
  number of relevant items of the whole query (trec_eval's map_cut);
* MAP@k over the hits (``map_hits``): the same sum divided by the number of relevant items
  found within the top k (0 when there is none): the convention the FinCARDS tables imply
  (tasks/fin_agentbench/README.md has the evidence). The two agree when every relevant item
  is within the top k; ``map_hits`` is never the lower;
* MRR@k: 1 / rank of the first relevant item within k, else 0;
* an id the model repeats counts once (first occurrence); ids that are not candidates are
  dropped by :func:`parse_ranking`; ids are compared by their string form, so ``3`` and ``"3"``
  are the same candidate (challenge files key their grades by strings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, SupportsFloat, SupportsIndex, TypeVar

from lm_eval_fin.text.cleantext import read_answer
from lm_eval_fin.text.jsontext import strip_fences

GAINS = ("exponential", "linear")
RELEVANCE_THRESHOLD = 1

# A candidate id: whatever the caller's candidates are (ints, strings), handed back as given.
Id = TypeVar("Id", bound=Hashable)
# A grade as a qrel holds it: whatever float() reads (other values raise ValueError).
Grade = str | SupportsFloat | SupportsIndex


def _gain(grade: float, gain: str) -> float:
    if grade < RELEVANCE_THRESHOLD:
        return 0.0
    return 2.0**grade - 1.0 if gain == "exponential" else float(grade)


def _discounted(grades: Iterable[float], gain: str) -> float:
    return sum(_gain(g, gain) / math.log2(i + 2) for i, g in enumerate(grades))


def _grades(qrel: Mapping[Any, Grade]) -> dict[str, float]:
    grades = {}
    for key, value in qrel.items():
        try:
            grade = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"grade of {key!r} is not a number: {value!r}") from None
        if math.isnan(grade) or grade < 0:
            raise ValueError(f"grade of {key!r} must be >= 0, got {value!r}")
        grades[str(key)] = grade
    return grades


def unique(ranking: Iterable[Id]) -> list[Id]:
    """First occurrence of each id, in order (ids compared by their string form)."""
    seen: set[str] = set()
    kept = []
    for item in ranking:
        key = str(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def rank_metrics(
    ranking: Sequence[Hashable] | None,
    qrel: Mapping[Any, Grade],
    k: int,
    gain: str = "exponential",
) -> dict[str, float]:
    """nDCG@k, MAP@k (``map``: trec_eval's; ``map_hits``: over the hits within k) and MRR@k
    of one query.

    ``ranking`` holds candidate ids best first (None or empty: an empty ranking, all zeros);
    ``qrel`` maps id -> grade (ungraded ids count as grade 0).

    >>> rank_metrics([2, 0, 1], {"0": 1, "1": 0, "2": 2}, k=3, gain="linear")["mrr"]
    1.0
    >>> rank_metrics([], {"0": 1}, k=5)
    {'ndcg': 0.0, 'map': 0.0, 'map_hits': 0.0, 'mrr': 0.0}
    >>> got = rank_metrics(["x", "a", "y"], {"a": 1, "b": 1, "c": 1}, k=3)
    >>> round(got["map"], 4), got["map_hits"]  # (1/2) / 3 relevant; (1/2) / 1 hit
    (0.1667, 0.5)
    """
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    grades = _grades(qrel)
    top = [grades.get(str(item), 0.0) for item in unique(ranking or [])[:k]]

    ideal = _discounted(sorted(grades.values(), reverse=True)[:k], gain)
    ndcg = _discounted(top, gain) / ideal if ideal > 0 else 0.0

    n_relevant = sum(g >= RELEVANCE_THRESHOLD for g in grades.values())
    hits, precision_sum, first_hit = 0, 0.0, None
    for rank, grade in enumerate(top, start=1):
        if grade >= RELEVANCE_THRESHOLD:
            hits += 1
            precision_sum += hits / rank
            first_hit = first_hit or rank
    return {
        "ndcg": ndcg,
        "map": precision_sum / n_relevant if n_relevant else 0.0,
        "map_hits": precision_sum / hits if hits else 0.0,
        "mrr": 1.0 / first_hit if first_hit else 0.0,
    }


# A bracketed list with no bracket inside it: the innermost lists of "[[4, 2], ...]" too.
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
# The body of a plain list: integers, optionally quoted, separated by commas or spaces.
_PLAIN_BODY = re.compile(r"\s*['\"]?-?\d+['\"]?(?:\s*[,;\s]\s*['\"]?-?\d+['\"]?)*\s*,?\s*")
_INTEGER = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
# "Document Index 3", "Chunk Index 12": the prompt's own way of naming a candidate.
_INDEX_MENTION = re.compile(r"\bIndex\s*#?\s*(\d+)\b", re.IGNORECASE)
# A bare run of integers separated by commas, for answers that forget the brackets.
_BARE_LIST = re.compile(r"(?<![\w.])\d+(?:\s*,\s*\d+)+(?![\w.])")
# An enumerated line: "1. 10-K", "- Earnings", "2) 8-K".
# Spaces, not \s: a \s* at a line start would run over every following blank line, and a
# long run of them would cost quadratic time.
_ENUMERATED = re.compile(r"^[ \t]*(?:\d+[.)]|[-*\u2022])[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def _integers(text: str) -> list[int]:
    return [int(m) for m in _INTEGER.findall(text)]


# What an enumerated item may carry around its candidate name: Markdown emphasis, quotes,
# and after a separator its reason ("1. **10-K**: the annual report").
_ITEM_DECORATION = "*_`'\"\u201c\u201d\u2018\u2019 \t"
_ITEM_REASON = re.compile(r"(?::|\s[-\u2013\u2014]\s|\(|,|;).*$")


def _item_name(item: str) -> str:
    """The name an enumerated item gives: its text up to a separator, without decoration or a
    final full stop, case-folded ("**10-K** (annual)" -> "10-k")."""
    head = _ITEM_REASON.sub("", item.strip(_ITEM_DECORATION))
    return head.strip(_ITEM_DECORATION).rstrip(".").strip(_ITEM_DECORATION).casefold()


def _label_order(text: str, labels: Mapping[Id, str]) -> list[Id]:
    """Candidates named on enumerated lines ("1. 10-K"), in line order. An item is read only
    where it *is* a candidate's name (decoration and a reason after a separator aside): a
    numbered list of sentences that mention a name ("4. Diluted earnings per share rose") is
    prose, not a ranking. A name that two candidates share names neither."""
    by_name: dict[str, list[Id]] = {}
    for cid, label in labels.items():
        if label and label.strip():
            by_name.setdefault(label.strip().casefold(), []).append(cid)
    order = []
    for item in _ENUMERATED.findall(text):
        named = by_name.get(_item_name(item), [])
        if len(named) == 1:
            order.append(named[0])
    return order


def parse_ranking(
    text: object,
    candidates: Sequence[Id],
    labels: Mapping[Id, str] | None = None,
) -> list[Id] | None:
    """Read a model's bracketed index list, e.g. ``"[4, 2, 1, 0, 3]"``, tolerantly.

    Code fences and prose around the list are ignored. The readings tried, in order, are:

    1. plain integer lists in brackets; the last one holding a candidate wins, since answers
       tend to come after reasoning (and the instruction's "[1st_most_relevant, ...]" echo
       holds no integer);
    2. the prompt's own names, "Document Index 3" / "[Chunk Index 5]", in order of mention;
    3. other bracketed lists holding integers among other words (last one wins);
    4. a bare comma-separated run of integers;
    5. with ``labels`` (candidate id -> short name such as "10-K"), enumerated lines whose
       item is one candidate's name ("1. 10-K", "2. **Earnings**: the call"); a numbered
       sentence that merely mentions a name is not read.

    Repeated ids keep their first occurrence and ids that are not candidates are dropped.
    Returns the candidates in the model's order, or None when no usable ranking is found (a
    parse failure).

    >>> parse_ranking("```json\\n[4, 2, 2, 9, 0]\\n```", [0, 1, 2, 3, 4])
    [4, 2, 0]
    >>> parse_ranking("1. 10-K\\n2. Earnings", [0, 1, 4], labels={0: "DEF14A", 1: "10-K", 4: "Earnings"})
    [1, 4]
    >>> parse_ranking("I cannot rank these.", [0, 1]) is None
    True
    """
    if not isinstance(text, (str, bytes)) or not text:
        return None
    text = read_answer(text)[0]
    by_key = {str(c): c for c in candidates}
    text = strip_fences(text)

    def usable(ids: Iterable[Hashable]) -> list[Id]:
        return unique(by_key[str(i)] for i in ids if str(i) in by_key)

    bodies = _BRACKETED.findall(text)
    plain = [b for b in bodies if _PLAIN_BODY.fullmatch(b)]
    plain_set = set(plain)
    readings = [
        *(_integers(b) for b in reversed(plain)),
        [int(i) for i in _INDEX_MENTION.findall(text)],
        *(_integers(b) for b in reversed(bodies) if b not in plain_set),
        *(_integers(run) for run in reversed(_BARE_LIST.findall(text))),
    ]
    for ids in readings:
        ranking = usable(ids)
        if ranking:
            return ranking
    if labels:
        named: list[Id] = _label_order(text, labels)
        return usable(named) or None
    return None
