"""What people and judges are compared on: the criteria of a label file, the per-sample metric
each is read from in a judged run, and the scale both sides share.

Each judged benchmark declares its :class:`Family` with its metrics (its package's
``metrics.py``, ``Benchmark.agreement``): FinLFQA's three 1..5 criteria and their sum, EMS's
0..10 rating, per-point ratings and recall. The command line hands the families of every
benchmark to the agreement command and the report; nothing here names a benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.outputs.owners import owner_of


@dataclass(frozen=True)
class RatingScale:
    """What the values of a criterion are. ``ordinal``: integer categories ``low..high`` (kappa
    and exact agreement are defined); ``categorical``: unordered categories (unweighted kappa)."""

    low: float
    high: float
    ordinal: bool = False
    categorical: bool = False

    @property
    def categories(self) -> list[int]:
        return list(range(int(self.low), int(self.high) + 1))

    @property
    def discrete(self) -> bool:
        return self.ordinal or self.categorical

    def describe(self) -> str:
        kind = "categories" if self.categorical else "integers" if self.ordinal else "continuous"
        return f"{self.low:g}..{self.high:g} ({kind})"


POINTS = "points"  # a label of one rating per reference point of the answer (Family.points)
PREFERENCE_SCALE = RatingScale(-1, 1, categorical=True)  # second preferred, tie, first preferred


@dataclass(frozen=True)
class Criterion:
    """One thing rated. ``metric``: the per-sample metric of the judged run; ``judge_factor``:
    that value times it is the value on ``scale``; ``label_scale``: what a person may write (None:
    derived, never written); ``asked``: a label template asks people for it. ``people``: judges
    are compared with people's labels on it; ``judges``: two judges, or one with itself, are
    compared on it. ``metric`` may be left empty where the metric's declaration fills it in."""

    name: str
    metric: str
    scale: RatingScale
    label_scale: RatingScale | None
    description: str
    judge_factor: float = 1.0
    asked: bool = True
    people: bool = True
    judges: bool = True


# a logged run's settings -> the top of its 0..top point scale (None: the run does not say)
PointTop = Callable[[Mapping[str, Any]], int | None]
# a logged record and that top -> the reference points and the judge's score of each on 0..top
# (None where it left a point unjudged); None where the record holds no points
PointScores = Callable[[Mapping[str, Any], int], tuple[tuple[str, ...], tuple[float | None, ...]] | None]


@dataclass(frozen=True)
class PointRatings:
    """People rate each reference point of an answer (``points``), read against the judge's
    score of the point: where a benchmark's runs keep the scale and the judge's scores."""

    top: PointTop
    scores: PointScores


@dataclass(frozen=True)
class Family:
    """The tasks of one benchmark and what is compared on them. ``main``: the criterion of the
    leaderboard and of preferences; ``judge_criteria``: what two judges are compared on."""

    name: str
    criteria: tuple[Criterion, ...]
    judge_criteria: tuple[Criterion, ...]
    main: str
    main_judged: str
    reference_field: str  # the doc field holding the reference answer, for the template
    points: PointRatings | None = None  # people may rate each reference point (``points``)
    total: str | None = None  # the criterion that is the sum of the asked ones (FinLFQA's overall)

    def criterion(self, name: str) -> Criterion:
        return next(c for c in self.criteria if c.name == name)

    def criterion_named(self, name: str) -> Criterion:
        """A criterion people label or two judges are compared on."""
        return next(c for c in (*self.criteria, *self.judge_criteria) if c.name == name)

    @property
    def label_names(self) -> list[str]:
        names = [c.name for c in self.criteria if c.label_scale is not None]
        return names + [POINTS] if self.points else names


def family_of(task: str, families: Iterable[Family]) -> Family | None:
    """The family of ``families`` that owns ``task``, by the benchmarks' rule
    (:func:`lm_eval_fin.outputs.owners.owner_of`: its variants too); None for a task none judges."""
    return owner_of(task, families)


def families_of(benchmarks: Iterable[Any]) -> tuple[Family, ...]:
    """The families of the benchmarks the command line hands over (their ``agreement``; the
    benchmarks are not imported here)."""
    return tuple(f for f in (getattr(b, "agreement", None) for b in benchmarks) if isinstance(f, Family))


def label_names(families: Iterable[Family]) -> list[str]:
    """Every criterion a label file may name, over ``families`` (each once, in order)."""
    return list(dict.fromkeys(name for family in families for name in family.label_names))


def points_scale(max_score: int) -> RatingScale:
    return RatingScale(0, max_score, ordinal=True)
