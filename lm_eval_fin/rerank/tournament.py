"""Stage 3 of FinCARDS: bootstrap listwise rounds aggregated with normalised Borda points.

Each round shuffles the candidates (a seeded generator per query, so a run is reproducible)
and cuts them into groups. The paper's rule gives a target size: all n candidates in one
group when n <= 15, max(15, n // 2) when n <= 50, else 25. Consecutive groups of exactly
that size would leave the remainder as the last group: a group of one for n = 16, 31 or odd
n from 33 to 49, of a few chunks for many other n, and a chunk there is barely compared. We
keep the number of groups, ceil(n / size), and make their sizes differ by at most one
(n = 16: 8 + 8; n = 31: 11 + 10 + 10). The judge ranks each group listwise from the cards
alone. A chunk ranked r-th of g earns (g - r) / (g - 1) points: 1 for first, 0 for last. A
group of one (only when the whole pool is one chunk) carries no comparison, so its chunk
earns 0.5, the expected points of a random rank; the public code gives it 1.0. The final
order sums the points over all rounds (every chunk appears once per round, so sum and mean
order alike); equal totals keep the order the candidates came in (stage-2 order in the full
pipeline, BM25 order in the s1+s3 ablation).

Stopping: after every round from the second on, the top-k set of the aggregate ranking
(points summed over the rounds so far) is compared with the one a round earlier; a Jaccard
similarity of at least 0.9 stops the tournament, and it never runs more than 5 rounds. The
public code compares each round's own ranking instead; with random regrouping that top set
moves with the grouping even when the judge is perfectly consistent (the best chunks of each
group tie), so it rarely stops before the limit. The aggregate is what the tournament
returns, so its stability is what the stop rule should test.

The paper's Table 3 strategies are options of :class:`Tournament`:

* single round: ``max_rounds=1``;
* fixed grouping (``regroup=False``): the first round's groups are kept for every round.
  Their members stay together; the order they are shown in is shuffled again each round.
  A deterministic judge whose answers are cached repeats its answer to a repeated request,
  so keeping the order too would make every round a copy of the first; shuffling only the
  order isolates what the paper credits random regrouping with: a chunk meets other chunks;
* mean-rank aggregation (``aggregation="mean_rank"``): order by the mean of a chunk's raw
  1-based position in its group over the rounds (lower first), without Borda's
  normalisation by group size;
* voting aggregation (``aggregation="votes"``): in each round a chunk gets one vote when it
  is within its group's share of the top k, the first ceil(k * g / n) of a group of g out
  of n candidates; order by votes;
* no early stop (``early_stop=False``): every tournament runs ``max_rounds`` rounds.

Rank variance, the stability figure of the paper's Table 3 ("computed across bootstrap
rounds"; the paper gives no formula, its values run from 0.03 to 0.09): for each chunk of the
final top k, its normalised rank in each round, (r - 1) / (g - 1) for rank r in a group of g
(0 first, 1 last, 0.5 alone), and the sample variance (n - 1 in the denominator) of those
values across the rounds; averaged over the top k. On this scale a judge that ranks at random
gives (g + 1) / (12 (g - 1)), about 1/12 = 0.083, and one that places every top chunk
identically in every round gives 0.

One round has one value per chunk and no spread to measure. Its rank variance is defined as
that of a random ranking in the round's groups, the mean over the top k of (g + 1) /
(12 (g - 1)): a single listwise pass carries no evidence of stability, so it gets the value
of a judge that has none, on the same scale as the measured ones; 0 would call an unrepeated
judgment perfectly stable. ``variance_measured`` tells the two apart, and the table marks
such a mean. With fewer than two candidates there is nothing to rank and no variance (None).

A group answer that cannot be parsed is replaced by the group in prior order (stage-2 or
BM25 order) rather than the shuffled order the code falls back to, so a failure adds no
noise; a partial ranking is completed with the chunks it left out, in prior order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, TypeVar

from lm_eval_fin.judge.base import JudgeRequest, chat_request
from lm_eval_fin.measures.ranking import parse_ranking
from lm_eval_fin.text.jsontext import as_id, parse_json_object
from lm_eval_fin.text.replies import reply_answer

SMALL_GROUP = 15
LARGE_GROUP = 25
MAX_ROUNDS = 5
JACCARD_STOP = 0.9
SINGLETON_POINTS = 0.5
AGGREGATIONS = ("borda", "mean_rank", "votes")

# a candidate: a chunk id in the pipeline, any hashable in the helpers' examples
Item = TypeVar("Item", bound=Hashable)


def group_size(n: int, small: int = SMALL_GROUP, large: int = LARGE_GROUP) -> int:
    """Group size of a round over n candidates.

    >>> [group_size(n) for n in (5, 15, 16, 31, 50, 51, 150)]
    [5, 15, 15, 15, 25, 25, 25]
    """
    if n <= small:
        return n
    if n <= 2 * large:
        return max(small, n // 2)
    return large


def balanced_sizes(n: int, size: int) -> list[int]:
    """Sizes of ceil(n / size) groups holding n items, differing by at most one (larger
    groups first), so no group is a small remainder.

    >>> balanced_sizes(16, 15), balanced_sizes(31, 15), balanced_sizes(50, 25), balanced_sizes(0, 15)
    ([8, 8], [11, 10, 10], [25, 25], [])
    """
    if n <= 0:
        return []
    groups = -(-n // max(size, 1))
    base, larger = divmod(n, groups)
    return [base + 1] * larger + [base] * (groups - larger)


def regroup(items: Sequence[Item], size: int, rng: random.Random) -> list[list[Item]]:
    """Shuffle ``items`` with ``rng`` and cut them into :func:`balanced_sizes` groups for
    the target ``size``."""
    shuffled = list(items)
    rng.shuffle(shuffled)
    groups, start = [], 0
    for length in balanced_sizes(len(shuffled), size):
        groups.append(shuffled[start : start + length])
        start += length
    return groups


def borda_points(group_len: int, rank: int) -> float:
    """Normalised Borda points of rank ``rank`` (1-based) in a group of ``group_len``.

    >>> borda_points(4, 1), borda_points(4, 2), borda_points(4, 4), borda_points(1, 1)
    (1.0, 0.6666666666666666, 0.0, 0.5)
    """
    if group_len == 1:
        return SINGLETON_POINTS
    return (group_len - rank) / (group_len - 1)


def round_points(ranked_groups: Sequence[Sequence[Item]]) -> dict[Item, float]:
    """Points of one round from its groups' rankings (best first)."""
    points: dict[Item, float] = {}
    for ranking in ranked_groups:
        for rank, item in enumerate(ranking, start=1):
            points[item] = points.get(item, 0.0) + borda_points(len(ranking), rank)
    return points


def round_votes(ranked_groups: Sequence[Sequence[Item]], top_k: int) -> dict[Item, float]:
    """Votes of one round: 1 for the first ceil(top_k * g / n) of each group of g (of n
    candidates in all), 0 for the rest.

    >>> round_votes([["a", "b", "c", "d"], ["e", "f", "g", "h"]], top_k=2)
    {'a': 1.0, 'b': 0.0, 'c': 0.0, 'd': 0.0, 'e': 1.0, 'f': 0.0, 'g': 0.0, 'h': 0.0}
    """
    n = sum(len(ranking) for ranking in ranked_groups)
    votes: dict[Item, float] = {}
    for ranking in ranked_groups:
        share = math.ceil(top_k * len(ranking) / n) if n else 0
        for rank, item in enumerate(ranking, start=1):
            votes[item] = 1.0 if rank <= share else 0.0
    return votes


def round_ranks(ranked_groups: Sequence[Sequence[Item]]) -> dict[Item, tuple[int, int]]:
    """(1-based rank, group size) of every item of one round."""
    return {item: (rank, len(ranking)) for ranking in ranked_groups for rank, item in enumerate(ranking, start=1)}


def normalised_rank(rank: int, group_len: int) -> float:
    """(r - 1) / (g - 1): 0 for first, 1 for last, 0.5 alone.

    >>> normalised_rank(1, 5), normalised_rank(5, 5), normalised_rank(1, 1)
    (0.0, 1.0, 0.5)
    """
    return 0.5 if group_len == 1 else (rank - 1) / (group_len - 1)


def random_rank_variance(group_len: int) -> float:
    """Variance of the normalised rank of a uniformly random position in a group of g,
    (g + 1) / (12 (g - 1)); 0 alone.

    >>> random_rank_variance(2), round(random_rank_variance(25), 4), random_rank_variance(1)
    (0.25, 0.0903, 0.0)
    """
    return 0.0 if group_len <= 1 else (group_len + 1) / (12 * (group_len - 1))


def sample_variance(values: Sequence[float]) -> float:
    """Sample variance, n - 1 in the denominator (at least two values).

    >>> sample_variance([0.0, 1.0]), sample_variance([0.25, 0.25, 0.25])
    (0.5, 0.0)
    """
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def rank_variance(rounds: Sequence[Sequence[Sequence[Item]]], items: Sequence[Item]) -> float | None:
    """The rank variance of ``items`` (the final top k) over ``rounds`` (each a list of
    ranked groups): the mean over the items of the sample variance of their normalised rank
    across rounds; with one round, the mean of :func:`random_rank_variance` of their groups
    (see the module notes); None without rounds or items.

    >>> round(rank_variance([[["a", "b", "c"]], [["b", "a", "c"]], [["a", "c", "b"]]], ["a", "b"]), 4)
    0.1667
    >>> round(rank_variance([[["a", "b"], ["c", "d", "e"]]], ["a", "c"]), 4)  # (0.25 + 4 / 24) / 2
    0.2083
    """
    if not rounds or not items:
        return None
    per_round = [round_ranks(groups) for groups in rounds]
    if len(per_round) == 1:
        return sum(random_rank_variance(per_round[0][item][1]) for item in items) / len(items)
    variances = [sample_variance([normalised_rank(*ranks[item]) for ranks in per_round]) for item in items]
    return sum(variances) / len(variances)


def order_by_points(points: Mapping[Item, float], prior: Sequence[Item]) -> list[Item]:
    """Items by descending points; equal points keep their position in ``prior``.

    >>> order_by_points({"a": 1.0, "b": 2.0, "c": 1.0}, prior=["c", "b", "a"])
    ['b', 'c', 'a']
    """
    position = {item: i for i, item in enumerate(prior)}
    return sorted(points, key=lambda item: (-points[item], position.get(item, len(position))))


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b|; two empty sets are identical (1.0).

    >>> jaccard({1, 2, 3}, {2, 3, 4}), jaccard(set(), set())
    (0.5, 1.0)
    """
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def complete_ranking(ranking: Sequence[Item] | None, group_prior: Sequence[Item]) -> list[Item]:
    """A full ranking of the group: the judge's order, then what it left out in prior order
    (the whole group in prior order when there is no ranking)."""
    ranked = list(ranking or [])
    listed = set(ranked)
    return ranked + [item for item in group_prior if item not in listed]


class Tournament(Generic[Item]):
    """The bootstrap rounds of one query: plan a round's groups, record their rankings, repeat
    until :attr:`finished`. Holds the per-round trace used by the audit."""

    def __init__(
        self,
        candidates: Sequence[Item],
        seed: str | int,
        top_k: int,
        max_rounds: int = MAX_ROUNDS,
        stop_at: float = JACCARD_STOP,
        small: int = SMALL_GROUP,
        large: int = LARGE_GROUP,
        aggregation: str = "borda",
        regroup: bool = True,
        early_stop: bool = True,
    ):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; choose from {list(AGGREGATIONS)}")
        if max_rounds < 1:
            raise ValueError("a tournament needs at least one round")
        self.prior = list(candidates)
        self.top_k = top_k
        self.max_rounds = max_rounds
        self.stop_at = stop_at
        self.aggregation = aggregation
        self.regroup = regroup
        self.early_stop = early_stop
        self.size = group_size(len(self.prior), small, large)  # target; see balanced_sizes
        self._rng = random.Random(str(seed))
        self._fixed: list[list[Item]] | None = None  # the groups kept when not regrouping
        self.rounds: list[list[list[Item]]] = []  # round -> group -> ranking (best first)
        self.round_orders: list[list[Item]] = []  # each round ranked by its own points
        self.running_orders: list[list[Item]] = []  # the aggregate order after each round
        self.similarities: list[float | None] = []
        self.stopped: str | None = None

    @property
    def finished(self) -> bool:
        return self.stopped is not None or not self.prior

    def plan_round(self) -> list[list[Item]]:
        """The groups of the next round, each in its shuffled presentation order."""
        if self.regroup or self._fixed is None:
            groups = regroup(self.prior, self.size, self._rng)
            if not self.regroup:
                self._fixed = [list(g) for g in groups]
            return groups
        return [self._rng.sample(group, len(group)) for group in self._fixed]

    def record_round(self, rankings: Sequence[Sequence[Item] | None], groups: Sequence[Sequence[Item]]) -> None:
        """Record the judge's ranking of each planned group (None: unparsable)."""
        position = {item: i for i, item in enumerate(self.prior)}
        ranked_groups = []
        for ranking, group in zip(rankings, groups):
            group_prior = sorted(group, key=position.__getitem__)
            ranked_groups.append(complete_ranking([c for c in ranking or [] if c in group], group_prior))
        previous = self.running_orders[-1][: self.top_k] if self.running_orders else None
        self.rounds.append(ranked_groups)
        self.round_orders.append(order_by_points(self._round_scores(ranked_groups), self.prior))
        self.running_orders.append(self.final_order())
        similarity = None
        if previous is not None:
            similarity = jaccard(set(previous), set(self.running_orders[-1][: self.top_k]))
            if self.early_stop and similarity >= self.stop_at:
                self.stopped = "converged"
        self.similarities.append(similarity)
        if self.stopped is None and len(self.rounds) >= self.max_rounds:
            self.stopped = "max_rounds"

    def _round_scores(self, ranked_groups: Sequence[Sequence[Item]]) -> dict[Item, float]:
        """One round's contribution to the aggregate, higher better."""
        if self.aggregation == "votes":
            return round_votes(ranked_groups, self.top_k)
        if self.aggregation == "mean_rank":
            return {item: -float(rank) for item, (rank, _) in round_ranks(ranked_groups).items()}
        return round_points(ranked_groups)

    def points(self) -> dict[Item, float]:
        """The aggregate score of every candidate over the rounds so far, higher better:
        summed Borda points, summed votes, or minus the mean raw rank."""
        total = {item: 0.0 for item in self.prior}
        for ranked_groups in self.rounds:
            for item, value in self._round_scores(ranked_groups).items():
                total[item] += value
        if self.aggregation == "mean_rank" and self.rounds:
            total = {item: value / len(self.rounds) for item, value in total.items()}
        return total

    def final_order(self) -> list[Item]:
        return order_by_points(self.points(), self.prior)

    def rank_variance(self) -> float | None:
        """Rank variance of the final top k across the rounds (see the module notes); None
        with fewer than two candidates or no round."""
        if len(self.prior) < 2:
            return None
        return rank_variance(self.rounds, self.final_order()[: self.top_k])

    @property
    def variance_measured(self) -> bool:
        """Whether :meth:`rank_variance` is measured (two rounds or more) rather than the
        one-round reference value."""
        return len(self.rounds) >= 2

    def round_positions(self, item: Item) -> list[int]:
        """The item's 1-based position in each round's own ranking."""
        return [order.index(item) + 1 for order in self.round_orders]

    def running_positions(self, item: Item) -> list[int]:
        """The item's 1-based position in the aggregate ranking after each round."""
        return [order.index(item) + 1 for order in self.running_orders]


# ---------------------------------------------------------------------------------------------
# The request and its answer

_INSTRUCTIONS = """You rank candidate evidence for a question about one company filing. You see the question and {shown}.

Rank every chunk of the group from most to least useful as evidence for the question. Weigh metric match, period match (a wrong year or quarter is a serious mismatch), scope (company, segment, region) and evidence type (figures and tables for numeric questions; definitions for questions about meaning or measurement). Boilerplate and headings go last. Rank relative to this group only; do not compute anything.

Answer with a JSON object {{"ranking": [<chunk ids, best first>]}} that lists every chunk id of the group exactly once."""
_SHOWN = {
    False: "one card per candidate chunk; cards describe the chunks, you never see the chunks themselves",
    True: "the start of each candidate chunk's text",
}


def ranking_schema(ids: Sequence[int]) -> dict:
    return {
        "title": "fincards_ranking",
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"enum": sorted(ids)},
                "minItems": len(ids),
                "maxItems": len(ids),
            }
        },
        "required": ["ranking"],
    }


def ranking_request(
    question: str,
    group: Sequence[tuple[int, str]],
    max_tokens: int,
    raw: bool = False,
) -> JudgeRequest:
    """The listwise request of one group: ``group`` holds (chunk id, the line that shows it:
    its card, or its text when ``raw``) in the round's shuffled order (the order is part of
    the bootstrap)."""
    lines = "\n".join(line for _, line in group)
    what = "Chunks" if raw else "Cards"
    user = f"Question: {question}\n\n{what} ({len(group)} chunks):\n{lines}\n\nRanking of all {len(group)} chunk ids as JSON:"
    return chat_request(
        _INSTRUCTIONS.format(shown=_SHOWN[raw]),
        user,
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=ranking_schema([chunk for chunk, _ in group]),
    )


def parse_listwise(text: object, ids: Sequence[int]) -> list[int] | None:
    """The ranked ids of a listwise answer (``{"ranking": [...]}`` or a bare bracketed list;
    entries may be ids, "[Chunk Index 7]"-style strings or objects with an id), restricted
    to ``ids``, repeats dropped; None when no id of ``ids`` is found.

    >>> parse_listwise('{"ranking": [5, "2", {"id": 9}, 5, 40]}', [2, 5, 9])
    [5, 2, 9]
    >>> parse_listwise("Best first: [9, 2]", [2, 5, 9])
    [9, 2]
    """
    allowed = set(ids)
    text = reply_answer(text)
    raw = parse_json_object(text)
    entries = raw.get("ranking") if raw is not None and isinstance(raw.get("ranking"), list) else None
    if entries is None and raw is not None:
        entries = next((v for v in raw.values() if isinstance(v, list)), None)
    if entries:
        ranked: list[int] = []
        for entry in entries:
            chunk = as_id(entry.get("id", entry.get("chunk_id")) if isinstance(entry, dict) else entry)
            if chunk in allowed and chunk not in ranked:
                ranked.append(chunk)
        if ranked:
            return ranked
    return parse_ranking(text, list(ids))
