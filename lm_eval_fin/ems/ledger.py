"""The per-document bookkeeping of an EMS pass: what went wrong in each stage (a judge failure
or an unreadable answer) and what judge work each document cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.judge.base import RequestUsage

STAGES = ("summary", "extraction", "matching", "claims", "scoring")


@dataclass
class RequestProblem:
    """What went wrong with one request: the judge failed it (``error``), or its answer
    stayed unreadable (``error`` None)."""

    stage: str
    error: str | None = None


def problem_of(stage: str, answer: Any) -> RequestProblem | None:
    """The problem of a :class:`lm_eval_fin.judge.ParsedAnswer`, if any."""
    if answer.failed:
        return RequestProblem(stage, answer.error)
    return RequestProblem(stage) if answer.unparsed else None


class Ledger:
    """The problems of each of ``n`` documents, by stage, and the judge work each cost. A
    request that served several documents (a text they share) is charged once, to the first
    it is charged to, so the documents' work adds up to the pass's."""

    def __init__(self, n: int):
        self.problems: list[list[RequestProblem]] = [[] for _ in range(n)]
        self.usage = [RequestUsage() for _ in range(n)]
        self._charged: set[int] = set()

    def add(self, doc: int, problem: RequestProblem | None) -> None:
        if problem is not None:
            self.problems[doc].append(problem)

    def charge(self, doc: int, usage: RequestUsage | None) -> None:
        if usage is not None and id(usage) not in self._charged:
            self._charged.add(id(usage))
            self.usage[doc].add(usage)

    def clear(self, doc: int, stages: Sequence[str]) -> bool:
        """Whether ``doc`` has no problem in any of ``stages``."""
        return not any(p.stage in stages for p in self.problems[doc])

    def parse_failures(self, doc: int) -> dict[str, int]:
        return {stage: sum(p.stage == stage and p.error is None for p in self.problems[doc]) for stage in STAGES}

    def first_error(self, doc: int) -> str | None:
        return next((p.error for p in self.problems[doc] if p.error is not None), None)
