"""Stage 2 of FinCARDS: round-robin group screening from cards only.

The BM25 candidates are dealt round-robin into groups of about 25 (candidate i goes to group
i mod ceil(n / 25)), so every group mixes strong, middling and weak BM25 matches and no group
is a block of near-duplicates. For each group the judge sees the question, the query intent
and the cards of the group (never the chunk text) and keeps 8 to 15 chunks (all of them in
a group smaller than 8), each with a relevance score from 0 to 100 and a short reason. The
kept chunks of all groups are merged: a chunk kept twice keeps its highest score, equal
scores are ordered by BM25 rank, and the first 50 go on to stage 3.

Coverage quotas keep kinds of evidence that a relevance score tends to undervalue:

* trend quota (trend and comparison questions): at least one chunk whose card shows a table
  with a time dimension;
* definition quota (definition and policy questions): at least one chunk whose card is a
  definition, defines a metric, or is policy text.

Which quotas apply comes from the query intent (see :mod:`lm_eval_fin.rerank.intent`). The
prompt states them, as in the paper and its code; unlike the code we also enforce them, in
two places:

* per group: when the group's picks miss a quota that a chunk of the group could fill, the
  best such chunk by BM25 is added with the lowest score the judge gave in that group;
* at the top-50 cut: such an added chunk has the group's lowest score, so it is the first to
  fall off. When no kept chunk fills a quota, the best dropped chunk that does replaces the
  last kept chunk that fills no quota (the list stays in score order: the newcomer goes
  last).

The minimum of 8 picks per group is enforced too: a judge that keeps fewer (from a group of
at least 8; a smaller group must be kept whole) is topped up with the group's best remaining
chunks by BM25, again at the group's lowest score. A group whose answer cannot be parsed is
topped up the same way from nothing, at score 0, so it loses to every judged pick but is not
dropped, and its quotas still apply. The trace marks every chunk we added (``via``). Other
differences from the code: the code keeps the first of duplicate picks and breaks score ties
by group order; we keep the maximum and break ties by BM25, as the paper describes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lm_eval_fin.judge.base import JudgeRequest, chat_request
from lm_eval_fin.measures.ranking import parse_ranking
from lm_eval_fin.rerank.cardview import fills_quota
from lm_eval_fin.rerank.intent import DEFINITION, TREND
from lm_eval_fin.text.jsontext import as_id, parse_json_object
from lm_eval_fin.text.replies import reply_answer

GROUP_SIZE = 25
MIN_KEEP = 8
MAX_KEEP = 15
TOP_N = 50
# Score of a pick whose answer named the chunk without a score.
UNSCORED = 50.0

T = TypeVar("T")


def round_robin_groups(items: Sequence[T], group_size: int = GROUP_SIZE) -> list[list[T]]:
    """Deal ``items`` (best first) into ceil(n / group_size) groups, item i to group i mod g.

    >>> round_robin_groups(list(range(7)), group_size=3)
    [[0, 3, 6], [1, 4], [2, 5]]
    """
    if not items:
        return []
    n_groups = math.ceil(len(items) / group_size)
    groups: list[list[T]] = [[] for _ in range(n_groups)]
    for position, item in enumerate(items):
        groups[position % n_groups].append(item)
    return groups


def keep_bounds(group_len: int, low: int = MIN_KEEP, high: int = MAX_KEEP) -> tuple[int, int]:
    """How many chunks the judge keeps from a group: (min, max), capped by the group's size.

    >>> keep_bounds(25), keep_bounds(10), keep_bounds(5)
    ((8, 15), (8, 10), (5, 5))
    """
    return min(low, group_len), min(high, group_len)


@dataclass(frozen=True)
class Pick:
    """One chunk kept in stage 2: its score, the group it was judged in, and why."""

    chunk: int
    score: float
    group: int
    reason: str = ""
    # "judge"; "pad" (topped up to the minimum), "fallback" (unparsable group answer, topped
    # up from nothing) or "quota:<name>" (added for a quota the group's picks missed)
    via: str = "judge"


# ---------------------------------------------------------------------------------------------
# The request

_QUOTA_TEXT = {
    TREND: "Coverage quota (trend or comparison question): keep at least one chunk that holds a "
    "table with a time dimension (time columns, several periods, or a year-over-year comparison), "
    "if this group has one, even when its score is modest.",
    DEFINITION: "Coverage quota (definition or policy question): keep at least one chunk that "
    "defines a metric, states how something is measured, or is policy text, if this group has one, even when it looks "
    "like standard wording.",
}

_INSTRUCTIONS = """You screen candidate evidence for a question about one company filing. You see the question, a structured reading of what it asks for (its intent), and {shown}.

Keep the chunks most likely to contain the evidence the question needs and give each a relevance score from 0 to 100. Judge by:
1. metrics: the {source} name the metrics the question asks about;
2. periods: the {source} periods match the question's periods (a wrong year or quarter is a serious mismatch);
3. scope: company-wide, segment, product or region as the question requires;
4. evidence type: questions that need figures favour chunks with numbers and tables; check that a table's periods and metrics fit, do not keep tables just for being tables;
5. boilerplate, headings and cautionary text rarely answer a question.

Answer with a JSON object {{"selected": [{{"id": <chunk id>, "score": <0-100>, "reason": "<at most 12 words>"}}]}}, most relevant first."""
_SHOWN = {
    False: ("one card per candidate chunk. Cards describe the chunks; you never see the chunks themselves", "card's"),
    True: ("the start of each candidate chunk's text", "chunk's"),
}


def instructions(raw: bool) -> str:
    shown, source = _SHOWN[raw]
    return _INSTRUCTIONS.format(shown=shown, source=source)


def screening_schema(low: int, high: int) -> dict[str, Any]:
    return {
        "title": "fincards_screening",
        "type": "object",
        "properties": {
            "selected": {
                "type": "array",
                "minItems": low,
                "maxItems": high,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "score": {"type": "integer", "minimum": 0, "maximum": 100},
                        "reason": {"type": "string"},
                    },
                    "required": ["id", "score", "reason"],
                },
            }
        },
        "required": ["selected"],
    }


def compact_intent(intent: Mapping[str, Any] | None) -> str:
    """The intent as one line of JSON, without empty fields and bookkeeping."""
    if not intent:
        return "(not available)"
    shown = {k: v for k, v in intent.items() if k != "source" and v not in ([], "", None, "none", "Other")}
    if isinstance(shown.get("temporal"), dict):
        shown["temporal"] = {k: v for k, v in shown["temporal"].items() if v not in ([], "none")}
        if not shown["temporal"]:
            del shown["temporal"]
    return json.dumps(shown, ensure_ascii=False)


def screening_request(
    question: str,
    intent: Mapping[str, Any] | None,
    shown: Sequence[str],
    quotas: Sequence[str],
    max_tokens: int,
    low: int = MIN_KEEP,
    high: int = MAX_KEEP,
    raw: bool = False,
) -> JudgeRequest:
    """The judge request of one group: ``shown`` holds each chunk's line (its card, or its
    text when ``raw``; see :func:`lm_eval_fin.rerank.cardview.show`) in BM25 order."""
    keep_low, keep_high = keep_bounds(len(shown), low, high)
    quota_text = "\n".join(_QUOTA_TEXT[q] for q in quotas)
    lines = "\n".join(shown)
    what = "Chunks" if raw else "Cards"
    user = (
        f"Question: {question}\n"
        f"Intent: {compact_intent(intent)}\n\n"
        f"{what} ({len(shown)} chunks):\n{lines}\n\n"
        + (f"{quota_text}\n\n" if quota_text else "")
        + f"Keep between {keep_low} and {keep_high} chunks, most relevant first, as JSON:"
    )
    return chat_request(
        instructions(raw),
        user,
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=screening_schema(keep_low, keep_high),
    )


# ---------------------------------------------------------------------------------------------
# Reading the answer

SCORE_RANGE = (0.0, 100.0)


def _as_score(value: Any) -> float | None:
    """A score on the 0..100 scale the prompt gives, else None (a placeholder such as
    "<0-100>", a number off the scale)."""
    if isinstance(value, bool):
        return None
    try:
        score = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return score if SCORE_RANGE[0] <= score <= SCORE_RANGE[1] else None


def parse_selection(text: object, group_ids: Sequence[int], high: int = MAX_KEEP) -> list[tuple[int, float, str]] | None:
    """(chunk id, score, reason) of the chunks the judge kept, in its order, or None.

    Ids outside the group are dropped, a repeated id keeps its first entry, at most ``high``
    entries are kept (the first ones, as the code does). An entry without a score, or a bare
    bracketed id list, scores 50; a score that is given but is no number on the 0..100 scale
    (150, "<0-100>") makes the answer unreadable: it is no verdict, so the judge is asked
    again and the BM25 fallback stands in if it stays so.

    >>> parse_selection('{"selected": [{"id": 4, "score": 91, "reason": "FY2024 revenue table"}, {"id": 99, "score": 80}]}', [3, 4])
    [(4, 91.0, 'FY2024 revenue table')]
    >>> parse_selection("keep [3, 4]", [3, 4])
    [(3, 50.0, ''), (4, 50.0, '')]
    """
    allowed = set(group_ids)
    text = reply_answer(text)
    raw = parse_json_object(text)
    entries: list[Any] = []
    if raw is not None:
        selected = raw.get("selected")
        entries = selected if isinstance(selected, list) else []
        if not entries:
            entries = next((v for v in raw.values() if isinstance(v, list)), [])
    if not entries:
        entries = parse_ranking(text, list(group_ids)) or []
    picks: list[tuple[int, float, str]] = []
    seen: set[int] = set()
    for entry in entries:
        if isinstance(entry, dict):
            chunk = as_id(entry.get("id", entry.get("chunk_id", entry.get("index"))))
            given = entry.get("score", entry.get("relevance_score"))
            score = _as_score(given)
            if given is not None and score is None:
                return None
            reason = entry.get("reason")
            reason = reason.strip()[:200] if isinstance(reason, str) else ""
        else:
            chunk, score, reason = as_id(entry), None, ""
        if chunk is None or chunk not in allowed or chunk in seen:
            continue
        seen.add(chunk)
        picks.append((chunk, UNSCORED if score is None else score, reason))
    return picks[:high] or None


# ---------------------------------------------------------------------------------------------
# From answers to the stage-2 list


def group_picks(
    group_index: int,
    group: Sequence[int],
    selection: list[tuple[int, float, str]] | None,
    cards: Mapping[int, Mapping[str, Any]],
    quotas: Sequence[str],
    low: int = MIN_KEEP,
) -> list[Pick]:
    """The picks of one group (``group`` in BM25 order): the judge's selection, topped up to
    the group's minimum with its best remaining chunks by BM25, plus a chunk for each quota
    the picks miss. What we add scores the lowest score the judge gave in the group, or 0
    when its answer could not be parsed (``selection`` None)."""
    picks = [Pick(chunk, score, group_index, reason) for chunk, score, reason in selection or []]
    floor = min((p.score for p in picks), default=0.0)
    minimum, _ = keep_bounds(len(group), low)
    if selection is None:
        via, note = "fallback", "judge answer unparsable: kept by BM25"
    else:
        via, note = "pad", f"judge kept {len(picks)} of at least {minimum}: topped up by BM25"
    chosen = {p.chunk for p in picks}
    for chunk in group:
        if len(picks) >= minimum:
            break
        if chunk not in chosen:
            picks.append(Pick(chunk, floor, group_index, note, via))
            chosen.add(chunk)
    for quota in quotas:
        if any(fills_quota(cards[p.chunk], quota) for p in picks):
            continue
        eligible = [chunk for chunk in group if fills_quota(cards[chunk], quota)]
        if eligible:  # group is in BM25 order, so the first eligible is the best by BM25
            picks.append(Pick(eligible[0], floor, group_index, f"added for the {quota} quota", f"quota:{quota}"))
    return picks


def keep_quotas_at_cut(
    ordered: Sequence[Pick],
    top_n: int,
    quotas: Sequence[str],
    cards: Mapping[int, Mapping[str, Any]],
) -> list[Pick]:
    """The first ``top_n`` of ``ordered`` (best first), except that a quota no kept chunk
    fills takes the best dropped chunk that fills it, in place of the last kept chunk that
    fills no quota; the newcomer goes last, so the list stays in score order."""
    kept, dropped = list(ordered[:top_n]), list(ordered[top_n:])

    def fills(pick: Pick, names: Sequence[str]) -> bool:
        return any(fills_quota(cards[pick.chunk], name) for name in names)

    for quota in quotas:
        if any(fills(p, [quota]) for p in kept):
            continue
        newcomer = next((p for p in dropped if fills(p, [quota])), None)
        slot = next((i for i in reversed(range(len(kept))) if not fills(kept[i], quotas)), None)
        if newcomer is None or slot is None:
            continue
        del kept[slot]
        dropped.remove(newcomer)
        note = f"kept at the top-{top_n} cut for the {quota} quota"
        kept.append(dataclasses.replace(newcomer, reason=f"{newcomer.reason}; {note}" if newcomer.reason else note))
    return kept


def merge_picks(
    picks: Sequence[Pick],
    bm25_rank: Mapping[int, int],
    top_n: int = TOP_N,
    quotas: Sequence[str] = (),
    cards: Mapping[int, Mapping[str, Any]] | None = None,
) -> list[Pick]:
    """Union of all groups' picks: the highest-scoring pick of each chunk, by score, equal
    scores by BM25 rank, cut at ``top_n`` with the ``quotas`` kept (see
    :func:`keep_quotas_at_cut`; ``cards`` are needed when there are quotas).

    >>> picks = [Pick(7, 60, 0), Pick(3, 80, 1), Pick(7, 90, 2), Pick(5, 80, 0)]
    >>> [(p.chunk, p.score) for p in merge_picks(picks, {3: 2, 5: 1, 7: 3}, top_n=2)]
    [(7, 90), (5, 80)]
    """
    best: dict[int, Pick] = {}
    for pick in picks:
        if pick.chunk not in best or pick.score > best[pick.chunk].score:
            best[pick.chunk] = pick
    ordered = sorted(best.values(), key=lambda p: (-p.score, bm25_rank[p.chunk]))
    if not quotas:
        return ordered[:top_n]
    return keep_quotas_at_cut(ordered, top_n, quotas, cards or {})
