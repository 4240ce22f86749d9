"""Which benchmark owns a task, one rule for every part that asks (the harness, the report,
agreement): a benchmark's name is the prefix of its tasks' names (``fin_lfqa`` owns ``fin_lfqa``,
``fin_lfqa_*`` and ``fin_lfqa-*``: a variant joined by "-" is no glob prefix match of the main
task's ``samples_fin_lfqa_*`` files), and where two names match, the longer one owns the task (a ``fin_lfqa_x``
benchmark would own ``fin_lfqa_x_long``, not ``fin_lfqa``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def owns(name: str, task: str) -> bool:
    """Whether a benchmark called ``name`` owns ``task``.

    >>> owns("fin_ems", "fin_ems"), owns("fin_ems", "fin_ems_long"), owns("fin_ems", "fin_emsx")
    (True, True, False)
    >>> owns("fin_lfqa", "fin_lfqa-test")
    True
    """
    return task == name or task.startswith((name + "_", name + "-"))


def owner_of(task: str, candidates: Iterable[N]) -> N | None:
    """The candidate (anything with a ``name``) that owns ``task``, the longest matching name
    winning; None when none does."""
    owners = [candidate for candidate in candidates if owns(candidate.name, task)]
    return max(owners, key=lambda candidate: len(candidate.name)) if owners else None
