"""What people and judges are compared on, per benchmark: the criteria of a label file, the
per-sample metric each is read from in a judged run, and the scale both sides share.

* fin_lfqa (every ``fin_lfqa*`` task): the FinLFQA judge's three criteria, integers 1..5
  (section 4.1 of the paper), and ``overall``, their sum 3..15 (the paper's "overall score").
* fin_ems: ``ems``, a person's 0..10 rating of how well the answer conveys the reference
  (every point, with its details, and nothing the reference contradicts), read against the
  judge's EMS-F1 times 10; and ``points``, a 0..max_score rating per reference saliency point
  of how fully the answer conveys it, read against the judge's score s_i of that point (0 for
  a point it matched to nothing). A person's EMS-Recall, the mean of their point ratings over
  max_score (equation 6 of the EMS paper), is read against the judge's (``recall``).

Two judges are compared on what each judge wrote: the same four FinLFQA criteria, or EMS's
and the RAGChecker-style claim metrics (0..1).
"""

from __future__ import annotations

from dataclasses import dataclass

from lm_eval_fin.outputs.owners import owner_of


@dataclass(frozen=True)
class Scale:
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


POINTS = "points"  # fin_ems: one rating per reference saliency point
PREFERENCE_SCALE = Scale(-1, 1, categorical=True)  # second preferred, tie, first preferred


@dataclass(frozen=True)
class Criterion:
    """One thing rated. ``metric``: the per-sample metric of the judged run; ``judge_factor``:
    that value times it is the value on ``scale``; ``label_scale``: what a person may write (None:
    derived, never written); ``asked``: a label template asks people for it."""

    name: str
    metric: str
    scale: Scale
    label_scale: Scale | None
    description: str
    judge_factor: float = 1.0
    asked: bool = True


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
    points: bool = False  # people may rate each reference saliency point (``points``)
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


_FIVE = Scale(1, 5, ordinal=True)
_FINLFQA_CRITERIA = (
    Criterion("accuracy", "judge_accuracy", _FIVE, _FIVE,
              "does the answer reach the reference's conclusions and answer the question fully (1..5)"),
    Criterion("numerical_correctness", "judge_numerical", _FIVE, _FIVE,
              "are its numbers and calculations correct (1..5)"),
    Criterion("evidence_entailment", "judge_entailment", _FIVE, _FIVE,
              "do the report paragraphs it cites support what it says (1..5)"),
    Criterion("overall", "judge_score", Scale(3, 15, ordinal=True), Scale(3, 15, ordinal=True),
              "the sum of the three (3..15); derived from them when they are given", asked=False),
)
FIN_LFQA = Family("fin_lfqa", _FINLFQA_CRITERIA, _FINLFQA_CRITERIA, main="overall", main_judged="overall",
                  reference_field="reference_clauses", total="overall")

_UNIT = Scale(0, 1)
_EMS_JUDGED = tuple(
    Criterion(metric, metric, _UNIT, None, description)
    for metric, description in (
        ("ems_llm_precision", "EMS-Precision with the judge's scores"),
        ("ems_llm_recall", "EMS-Recall with the judge's scores"),
        ("ems_llm_f1", "EMS-F1 with the judge's scores"),
        ("ragchecker_precision", "share of the answer's claims the reference entails"),
        ("ragchecker_recall", "share of the reference's claims the answer entails"),
        ("ragchecker_f1", "F1 of the two claim shares"),
    )
)
FIN_EMS = Family(
    "fin_ems",
    (
        Criterion("ems", "ems_llm_f1", Scale(0, 10), Scale(0, 10, ordinal=True),
                  "how well the answer conveys the reference: every point, with its details, and nothing "
                  "it contradicts (0..10)", judge_factor=10.0),
        Criterion("recall", "ems_llm_recall", _UNIT, None,
                  "EMS-Recall: the mean point rating over max_score; derived from points", asked=False),
    ),
    _EMS_JUDGED,
    main="ems",
    main_judged="ems_llm_f1",
    reference_field="reference",
    points=True,
)
FAMILIES = (FIN_LFQA, FIN_EMS)


def family_of(task: str) -> Family | None:
    """The family of a task: ``fin_lfqa`` and its variants (``fin_lfqa-posthoc``, ...), ``fin_ems``;
    the benchmarks' rule (:func:`lm_eval_fin.outputs.owners.owner_of`)."""
    return owner_of(task, FAMILIES)


def points_scale(max_score: int) -> Scale:
    return Scale(0, max_score, ordinal=True)
