"""Cost accounting: LLM calls and tokens per stage and per query.

Every stage sends one batch (across all queries) through :func:`complete_parsed`, which may
re-ask unparsable answers. :class:`MeteredJudge` sits between the stage and the judge: the
stage registers who owns each request (a query of a stage, or a chunk for cards), and every
response, re-asks included, is booked to that owner. An owner is a tuple whose first item
names its stage (``("intent", 3)``, ``("tournament:full", 3)``), so the costs also add up
per stage (:func:`costs_by_stage`). A card serves every query whose candidates include its
chunk, so its cost is split over those queries (:func:`split_by_use`), not over the run. Token counts come from the responses;
cached answers carry the counts of the call that produced them, so the figures describe
what the method costs, not what this particular run happened to recompute (``cached`` says
how many answers came from the cache).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

from lm_eval_fin.judge.base import BatchStats, Judge, JudgeRequest, JudgeResponse

# what a cost is booked to: a card's chunk key, an owner tuple
Item = TypeVar("Item", bound=Hashable)


@dataclass
class Cost:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0

    def book(self, response: JudgeResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.cached += int(response.cached)

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached + other.cached,
        )

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def costs_by_stage(costs: Mapping[Hashable, Cost]) -> dict[str, Cost]:
    """The costs of ``(stage[:detail], ...)`` owners summed per stage, in first-seen order;
    owners of another shape (requests nobody registered) are left out.

    >>> costs_by_stage({("intent", 0): Cost(1, 10), ("tournament:full", 0): Cost(2, 30),
    ...                 ("tournament:s1+s3", 1): Cost(3, 40), None: Cost(9)})
    {'intent': Cost(calls=1, prompt_tokens=10, completion_tokens=0, cached=0), 'tournament': Cost(calls=5, prompt_tokens=70, completion_tokens=0, cached=0)}
    """
    totals: dict[str, Cost] = {}
    for owner, cost in costs.items():
        if isinstance(owner, tuple) and owner and isinstance(owner[0], str):
            stage = owner[0].split(":", 1)[0]
            totals[stage] = totals.get(stage, Cost()) + cost
    return totals


def split_by_use(costs: Mapping[Item, Cost], used_by: Sequence[Collection[Item]]) -> list[dict[str, float]]:
    """Each user's share of ``costs``: an item's cost is split evenly over the users whose
    collection holds it (``used_by[i]`` holds the items user i uses).

    >>> shares = split_by_use({"a": Cost(2, 10), "b": Cost(1, 4)}, [{"a"}, {"a", "b"}, set()])
    >>> [(s["calls"], s["prompt_tokens"]) for s in shares]
    [(1.0, 5.0), (2.0, 9.0), (0.0, 0.0)]
    """
    users = Counter(item for items in used_by for item in set(items))
    shares = []
    for items in used_by:
        share = dict.fromkeys(asdict(Cost()), 0.0)
        for item in set(items):
            for name, value in asdict(costs.get(item, Cost())).items():
                share[name] += value / users[item]
        shares.append(share)
    return shares


def _request_key(request: JudgeRequest) -> tuple:
    # A re-ask differs from its request only in ``attempt``, so the messages identify both.
    return tuple((message["role"], message["content"]) for message in request.messages)


class MeteredJudge(Judge):
    """A judge wrapper that books each response to the owner of its request.

    ``stats``, ``last_batch`` and ``spec`` are the wrapped judge's, so :func:`complete_parsed`
    updates the real judge's counters through it.
    """

    def __init__(self, judge: Judge):
        self.judge = judge
        self.spec = judge.spec
        self._owners: dict[tuple, list[Hashable]] = {}
        self.costs: dict[Hashable, Cost] = defaultdict(Cost)

    def expect(self, requests: Sequence[JudgeRequest], owners: Sequence[Hashable]) -> None:
        """Register the owner of each request of the next batch. Two owners may send the same
        request (a small pool shuffled alike for two variants): its n-th copy in a batch is
        booked to its n-th owner."""
        self._owners = {}
        for request, owner in zip(requests, owners, strict=True):
            self._owners.setdefault(_request_key(request), []).append(owner)

    def complete(self, requests: Sequence[JudgeRequest], desc: str = "judge") -> list[JudgeResponse]:
        responses = self.judge.complete(requests, desc=desc)
        seen: dict[tuple, int] = defaultdict(int)
        for request, response in zip(requests, responses):
            key = _request_key(request)
            owners = self._owners.get(key, [None])
            self.costs[owners[seen[key] % len(owners)]].book(response)
            seen[key] += 1
        return responses

    # A wrapped test double without stats raises AttributeError here, so getattr(metered, "stats", None)
    # is None, as for the double itself.
    @property
    def stats(self) -> BatchStats:
        return self.judge.stats

    @stats.setter
    def stats(self, value: BatchStats) -> None:
        self.judge.stats = value

    @property
    def last_batch(self) -> BatchStats:
        return self.judge.last_batch

    @last_batch.setter
    def last_batch(self, value: BatchStats) -> None:
        try:
            self.judge.last_batch = value
        except AttributeError:
            pass

    def cost(self, owners: Sequence[Hashable]) -> Cost:
        """The summed cost of ``owners``."""
        total = Cost()
        for owner in owners:
            if owner in self.costs:
                total = total + self.costs[owner]
        return total
