"""Cost accounting: LLM calls and tokens per stage and per query.

Every stage sends one batch (across all queries) through :func:`complete_parsed`, which may
re-ask unparsable answers. :class:`MeteredJudge` sits between the stage and the judge: the
stage registers who owns each request (a query of a stage, or a chunk for cards), and every
response, re-asks included, is booked to that owner. Token counts come from the responses;
cached answers carry the counts of the call that produced them, so the figures describe
what the method costs, not what this particular run happened to recompute (``cached`` says
how many answers came from the cache).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Hashable, Sequence

from lm_eval_fin.judge.base import BatchStats, Judge, JudgeRequest, JudgeResponse


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

    def share(self, parts: int) -> dict[str, float]:
        """This cost split evenly over ``parts`` (e.g. the card cost over the queries)."""
        return {name: value / parts for name, value in asdict(self).items()} if parts else asdict(self)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


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

    @property
    def stats(self) -> BatchStats | None:
        return getattr(self.judge, "stats", None)

    @property
    def last_batch(self) -> BatchStats | None:
        return getattr(self.judge, "last_batch", None)

    @last_batch.setter
    def last_batch(self, value: BatchStats) -> None:
        try:
            self.judge.last_batch = value  # type: ignore[attr-defined]
        except AttributeError:
            pass

    def cost(self, owners: Sequence[Hashable]) -> Cost:
        """The summed cost of ``owners``."""
        total = Cost()
        for owner in owners:
            if owner in self.costs:
                total = total + self.costs[owner]
        return total
