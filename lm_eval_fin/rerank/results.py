"""What a FinCARDS run returns: the queries it ranks, each variant's answer to each query, the
judge's outcome and the counts of every stage (see :mod:`~lm_eval_fin.rerank.pipeline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.rerank.cost import Cost


@dataclass(frozen=True)
class Query:
    """One chunk-ranking query: the question, the filing's chunks by index, the grades, and
    the kind of filing (:mod:`~lm_eval_fin.rerank.doctype`) with where that was read."""

    id: str
    question: str
    chunks: Mapping[int, str]
    qrel: Mapping[str, Any] | None = None
    doc_type: str | None = None
    doc_type_from: str = "undetermined"


@dataclass
class JudgeOutcome:
    """What the judge did for one variant of one query: how many of the requests it needed
    failed (no answer) or stayed unparsable, and the first error."""

    failed: int = 0
    unparsed: int = 0
    first_error: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``fallback`` (some answers unparsable: fallbacks stood in) or ``failed``."""
        if self.failed:
            return "failed"
        return "fallback" if self.unparsed else "ok"

    def add(self, other: JudgeOutcome) -> None:
        self.failed += other.failed
        self.unparsed += other.unparsed
        self.first_error = self.first_error or other.first_error

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "failed": self.failed, "unparsed": self.unparsed, "first_error": self.first_error}


@dataclass
class VariantResult:
    """One variant's answer to one query. ``ranking`` and ``scores`` are None when the judge
    failed a request the variant needed (``judge.status == "failed"``)."""

    query_id: str
    variant: str
    ranking: list[int] | None
    audit: dict[str, Any]
    cost: Mapping[str, float]
    scores: dict[str, float] | None = None
    rank_variance: float | None = None
    variance_measured: bool = True
    candidates: int = 0  # stage-1 candidates
    survivors: int | None = None  # stage-2 output (variants with stage 2)
    judge: JudgeOutcome = field(default_factory=JudgeOutcome)
    doc_type: str | None = None
    graded: bool = False  # the query has grades (scores None then means the judge failed)

    def as_record(self) -> dict[str, Any]:
        return {
            "id": self.query_id,
            "variant": self.variant,
            "doc_type": self.doc_type,
            "ranking": self.ranking,
            "scores": self.scores,
            "rank_variance": self.rank_variance,
            "rank_variance_measured": self.variance_measured if self.rank_variance is not None else None,
            "candidates": {"stage1": self.candidates, "stage2": self.survivors},
            "judge": self.judge.as_dict(),
            "cost": self.cost,
            "audit": self.audit,
        }


@dataclass
class StageCount:
    """Requests of a stage, how many failed (no answer) or stayed unparsable after the
    re-asks, and what the stage cost (every call, re-asks included, over the whole run)."""

    requests: int = 0
    failed: int = 0
    unparsed: int = 0
    cost: Cost = field(default_factory=Cost)
    first_error: str | None = None

    @property
    def unusable(self) -> int:
        return self.failed + self.unparsed


@dataclass
class RunResult:
    results: list[VariantResult]
    stages: dict[str, StageCount] = field(default_factory=dict)
    card_cost: Cost = field(default_factory=Cost)
    distinct_chunks: int = 0
    spans_kept: int = 0  # verbatim numeric spans on the judge's cards
    spans_dropped: int = 0  # spans the judge wrote that the chunk does not hold

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.stages.values())

    @property
    def unparsed(self) -> int:
        return sum(c.unparsed for c in self.stages.values())
