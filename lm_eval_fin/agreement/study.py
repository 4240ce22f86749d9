"""The comparisons of an agreement study, from the answers of the runs and people's labels.

For each benchmark family in the runs:

* each judge against people (the mean of the annotators of each answer), per criterion, and
  the leaderboard order of the models under each;
* with two or more annotators, the annotators against each other (how well people agree: the
  ceiling a judge can be expected to reach) and each judge against the annotators' single
  ratings (Cohen's kappa needs one rating per answer, which a mean of several is not). Both are
  pooled over the annotators: every pair of two annotators' ratings of an answer, every
  annotator's rating against the judge's, resampled by whole answers; so 100 annotators make
  two comparisons, not 5,000. ``pairwise`` adds each pair of annotators and each annotator
  against each judge;
* each judge against people's preferences between two answers;
* each pair of judges on the answers both judged, and the leaderboard order under each;
* each judge against itself where it judged the same answers in several runs (stability).

A value a judge left undefined (it failed, or its reply did not parse) is never a score: the
unit is left out and counted as unjudged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypedDict

import numpy as np

from lm_eval_fin.agreement import stats
from lm_eval_fin.agreement.criteria import POINTS, PREFERENCE_SCALE, Criterion, Family, Scale, family_of
from lm_eval_fin.agreement.matching import Collection, Key, PeopleLabels, points_criterion_scale
from lm_eval_fin.agreement.settings import CONFIDENCE, RESAMPLES, StudySettings
from lm_eval_fin.agreement.stats import Figures, Order, Stability

JUDGE_PEOPLE = "judge vs people"
ANNOTATORS = "annotator vs annotator"
JUDGE_ANNOTATOR = "judge vs annotator"
PREFERENCES = "judge vs preferences"
JUDGES = "judge vs judge"
REPEATS = "judge vs itself"
ANNOTATORS_POOLED = "each other (every pair of ratings of an answer, pooled)"

# what a rater rated: an answer (its Key), or, pooled over annotators, an answer and an annotator
Unit = tuple[str, ...]


def answer_of(unit: Unit) -> Key:
    """The answer a unit is (part of)."""
    return unit[0], unit[1], unit[2], unit[3]


class _Resampling(TypedDict):
    """The bootstrap settings every statistic takes as keywords."""

    resamples: int
    seed: int
    confidence: float


@dataclass
class Rater:
    """What one rater gave each answer: per criterion a value (None: a judge left it undefined),
    and per-point ratings with the reference points they rate. ``integer``: the values are single
    ratings on the criteria's scales (not means of several annotators); ``fallible``: a judge,
    whose undefined values are failures to count."""

    name: str
    values: dict[Unit, dict[str, float | None]]
    points: dict[Unit, tuple[tuple[str, ...], tuple[float | None, ...]]] = field(default_factory=dict)
    integer: bool = True
    fallible: bool = False

    def gives(self, criterion: str) -> bool:
        """Whether any answer has a value on ``criterion`` (a judge whose runs did not compute
        a metric, e.g. RAGChecker switched off, gives none: that is no failure)."""
        return any(row.get(criterion) is not None for row in self.values.values())


@dataclass
class Comparison:
    """One rater against another on one family's criteria. ``skipped[criterion]``: units left
    out because the judged rater left them undefined (``unjudged``), the reference did
    (``reference unjudged``), or the judged rater has no such answer (``not in its runs``)."""

    kind: str
    family: str
    reference: str
    judged: str
    figures: dict[str, Figures] = field(default_factory=dict)
    stability: dict[str, Stability] = field(default_factory=dict)
    leaderboard: Order | None = None
    leaderboard_criterion: str | None = None
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unjudged: set[tuple[str, Key]] = field(default_factory=set)  # (judge, answer) left undefined, to report

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "family": self.family,
            "reference": self.reference,
            "judged": self.judged,
            "criteria": {name: f.as_dict() for name, f in self.figures.items()},
            "stability": {name: s.as_dict() for name, s in self.stability.items()},
            "leaderboard": None if self.leaderboard is None else {
                "criterion": self.leaderboard_criterion, **self.leaderboard.as_dict()},
            "skipped": self.skipped,
            "notes": list(self.notes),
        }


def _in_family(key: Unit, family: Family) -> bool:
    return family_of(key[0]) is family


def judge_rater(collection: Collection, judge: str, family: Family, criteria: Sequence[Criterion]) -> Rater:
    """A judge's values on ``criteria`` (its first run of each answer)."""
    rater = Rater(judge, {}, fallible=True)
    for key, runs in collection.by_judge(judge).items():
        if not _in_family(key, family):
            continue
        first = runs[0]
        rater.values[key] = {
            c.name: None if first.values.get(c.metric) is None else first.values[c.metric] * c.judge_factor
            for c in criteria
        }
        if family.points and (scores := first.point_scores()) is not None:
            rater.points[key] = scores
    return rater


def annotator_rater(people: PeopleLabels, annotator: str, family: Family) -> Rater:
    name = f"annotator {annotator}" if annotator else "annotator"
    return Rater(name, {k: dict(v) for k, v in people.scores.get(annotator, {}).items() if _in_family(k, family)},
                 {k: v for k, v in people.points.get(annotator, {}).items() if _in_family(k, family)})


def people_rater(people: PeopleLabels, family: Family) -> Rater:
    """People's ratings of each answer: the mean over its annotators, per criterion and point
    (a point counts the annotators who rated the same reference points as the first)."""
    raters = [annotator_rater(people, a, family) for a in people.annotators]
    raters = [r for r in raters if r.values]
    keys = sorted({k for r in raters for k in r.values})
    values: dict[Unit, dict[str, float | None]] = {}
    points: dict[Unit, tuple[tuple[str, ...], tuple[float | None, ...]]] = {}
    single = True  # every answer has one rating per criterion (kappa is defined)
    for key in keys:
        given: dict[str, list[float]] = {}
        for rater in raters:
            for name, value in rater.values.get(key, {}).items():
                if value is not None:  # always so: an annotator's labels hold no undefined value
                    given.setdefault(name, []).append(value)
        values[key] = {name: float(np.mean(v)) for name, v in given.items()}
        single = single and all(len(v) == 1 for v in given.values())
        rated = [r.points[key] for r in raters if key in r.points]
        if rated:
            same = [ratings for reference, ratings in rated if reference == rated[0][0]]
            means = [None if any(r[i] is None for r in same) else float(np.mean([r[i] for r in same]))
                     for i in range(len(rated[0][0]))]
            points[key] = (rated[0][0], tuple(means))
            single = single and len(same) == 1
    name = "people" if len(raters) == 1 else f"people (mean of {len(raters)} annotators)"
    return Rater(name, values, points, integer=single)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _system(key: Unit, several_tasks: bool) -> str:
    return f"{key[2]} · {key[0]}" if several_tasks else key[2]


def _integer_scale(scale: Scale, *arrays: Sequence[float]) -> Scale:
    """``scale`` where every value is a whole number; else the same range as continuous."""
    whole = all(float(v).is_integer() for values in arrays for v in values)
    return scale if whole or not scale.discrete else Scale(scale.low, scale.high)


def compare_raters(kind: str, family: Family, reference: Rater, judged: Rater, criteria: Sequence[Criterion],
                   main: str | None, collection: Collection, settings: StudySettings,
                   cluster_of: Callable[[Unit], Hashable] | None = None) -> Comparison:
    """``judged`` against ``reference`` on each criterion (and per point where both rated the same
    reference points), and the leaderboard order on ``main``. ``cluster_of``: the cluster of each
    unit, where units are resampled in clusters (an answer's ratings by several annotators)."""
    comparison = Comparison(kind, family.name, reference.name, judged.name)
    options: _Resampling = {"resamples": settings.resamples, "seed": settings.seed, "confidence": settings.confidence}
    several_tasks = len({k[0] for k in reference.values}) > 1
    # a judge silent on a criterion did not compute it (RAGChecker switched off) where it gave
    # others; one silent on all of them failed everywhere, and its answers count as unjudged
    speaking = [r for r in (reference, judged) if not r.fallible or any(r.gives(c.name) for c in criteria)]
    for criterion in criteria:
        silent = [r.name for r in speaking if r.fallible and not r.gives(criterion.name)]
        if silent:
            if any(r.gives(criterion.name) for r in (reference, judged)):
                comparison.notes.append(f"{criterion.name}: {' and '.join(silent)} gives no value in its runs (not "
                                        "computed there); not compared")
            continue
        pairs: list[tuple[Unit, float, float]] = []
        counts = {"unjudged": 0, "reference unjudged": 0, "not in its runs": 0}
        for key, row in reference.values.items():
            if criterion.name not in row:
                continue
            reference_value = row[criterion.name]
            if reference_value is None:
                if reference.fallible:
                    counts["reference unjudged"] += 1
                    comparison.unjudged.add((reference.name, answer_of(key)))
                continue
            judged_value = judged.values[key].get(criterion.name) if key in judged.values else None
            if key not in judged.values:
                counts["not in its runs"] += 1
            elif judged_value is None:
                counts["unjudged"] += 1
                comparison.unjudged.add((judged.name, answer_of(key)))
            else:
                pairs.append((key, reference_value, judged_value))
        if not pairs and not any(counts.values()):
            continue
        x, y = [p[1] for p in pairs], [p[2] for p in pairs]
        scale = criterion.scale if reference.integer and judged.integer else Scale(criterion.scale.low,
                                                                                   criterion.scale.high)
        try:
            comparison.figures[criterion.name] = stats.compare(
                x, y, _integer_scale(scale, x, y), clusters=_clusters([p[0] for p in pairs], cluster_of), **options)
        except ValueError as exc:  # a value off its scale: the runs or labels are not what they claim
            raise ValueError(f"{judged.name} against {reference.name} on {criterion.name}: {exc}") from None
        comparison.skipped[criterion.name] = counts
        if criterion.name == main and pairs:
            comparison.leaderboard_criterion = main
            comparison.leaderboard = stats.leaderboard_order([_system(p[0], several_tasks) for p in pairs], x, y,
                                                             **options)
    if family.points and reference.points and judged.points:
        _compare_points(comparison, reference, judged, collection, options, cluster_of or (lambda unit: unit))
    return comparison


def _clusters(units: Sequence[Unit], cluster_of: Callable[[Unit], Hashable] | None) -> list[int] | None:
    if cluster_of is None:
        return None
    number: dict[Hashable, int] = {}
    return [number.setdefault(cluster_of(unit), len(number)) for unit in units]


def _compare_points(comparison: Comparison, reference: Rater, judged: Rater, collection: Collection,
                    options: _Resampling, cluster_of: Callable[[Unit], Hashable]) -> None:
    x: list[float] = []
    y: list[float] = []
    clusters: list[Hashable] = []
    counts = {"unjudged": 0, "reference unjudged": 0, "not in its runs": 0, "other reference points": 0}
    used: list[Unit] = []
    for key, (points, ratings) in reference.points.items():
        if key not in judged.points:
            counts["not in its runs"] += 1
            continue
        their_points, their_scores = judged.points[key]
        if their_points != points:
            counts["other reference points"] += 1
            continue
        used.append(key)
        for mine, theirs in zip(ratings, their_scores):
            if mine is None:
                if reference.fallible:
                    counts["reference unjudged"] += 1
                    comparison.unjudged.add((reference.name, answer_of(key)))
            elif theirs is None:
                counts["unjudged"] += 1
                comparison.unjudged.add((judged.name, answer_of(key)))
            else:
                x.append(mine)
                y.append(theirs)
                clusters.append(cluster_of(key))
    scale = points_criterion_scale([answer_of(unit) for unit in used], collection.distinct())
    if scale is None:
        if used:
            comparison.notes.append("point ratings not compared: the runs differ in max_score")
        return
    if not reference.integer or not judged.integer:
        scale = Scale(scale.low, scale.high)
    number: dict[Hashable, int] = {}
    comparison.figures[POINTS] = stats.compare(x, y, _integer_scale(scale, x, y),
                                               clusters=[number.setdefault(c, len(number)) for c in clusters],
                                               **options)
    comparison.skipped[POINTS] = counts
    if counts["other reference points"]:
        comparison.notes.append(f"{counts['other reference points']} answers' point ratings are on reference points "
                                "this judge did not extract (its extraction differs); only the other answers' "
                                "points are compared")


def compare_preferences(family: Family, people: PeopleLabels, judge: Rater, settings: StudySettings) -> Comparison:
    """A judge's preference between two answers (the one with the higher value on the criterion,
    or a tie) against people's."""
    comparison = Comparison(PREFERENCES, family.name, "people's preferences", judge.name)
    by_criterion: dict[str, list[tuple[int, int]]] = {}
    for preference, first, second in people.preferences:
        if not _in_family(first, family):
            continue
        criterion = preference.criterion or family.main
        counts = comparison.skipped.setdefault(criterion, {"unjudged": 0, "not in its runs": 0})
        pairs = by_criterion.setdefault(criterion, [])
        if first not in judge.values or second not in judge.values:
            counts["not in its runs"] += 1
            continue
        a, b = judge.values[first].get(criterion), judge.values[second].get(criterion)
        if a is None or b is None:
            counts["unjudged"] += 1
            comparison.unjudged |= {(judge.name, k) for k, v in ((first, a), (second, b)) if v is None}
            continue
        pairs.append((preference.preferred, int(np.sign(a - b))))
    for criterion, pairs in by_criterion.items():
        comparison.figures[criterion] = stats.compare([p[0] for p in pairs], [p[1] for p in pairs], PREFERENCE_SCALE,
                                                      resamples=settings.resamples, seed=settings.seed,
                                                      confidence=settings.confidence)
    return comparison


def stability_of(repeats: Sequence[Sequence[Mapping[str, float | None]]], criteria: Sequence[Criterion],
                 settings: StudySettings) -> dict[str, Stability]:
    """Per criterion, the agreement of k runs of one judge: ``repeats[r][unit]`` maps each
    criterion's metric to run r's value for the unit (absent or None: unjudged)."""
    found = {}
    for criterion in criteria:
        table = [[_scaled(v.get(criterion.metric), criterion.judge_factor) for v in run] for run in repeats]
        if not table or not any(value is not None for run in table for value in run):
            continue
        flat = [value for run in table for value in run if value is not None]
        found[criterion.name] = stats.stability(table, _integer_scale(criterion.scale, flat),
                                                resamples=settings.resamples, seed=settings.seed,
                                                confidence=settings.confidence)
    return found


def judge_stability(repeats: Sequence[Mapping[str, Mapping[str, float]]], task: str, *,
                    resamples: int = RESAMPLES, seed: int = 0,
                    confidence: float = CONFIDENCE) -> dict[str, Stability]:
    """How well a judge agrees with itself over k >= 2 runs on the same answers of ``task``.
    ``repeats[r]`` maps each document id to run r's per-sample metric values (a
    :class:`lm_eval_fin.outputs.runfiles.Sample`'s ``values``); documents missing from a run, or
    without a value, count as unjudged there. Per criterion of the task's family (FinLFQA's
    three and overall; EMS's and the claim metrics): :class:`~lm_eval_fin.agreement.stats.Stability`."""
    family = family_of(task)
    if family is None:
        raise ValueError(f"{task} has no judged criteria (fin_lfqa*, fin_ems)")
    documents = sorted({doc for run in repeats for doc in run})
    table = [[dict(run.get(doc, {})) for doc in documents] for run in repeats]
    return stability_of(table, family.judge_criteria, StudySettings(resamples, seed, confidence))


def repeats_comparison(collection: Collection, judge: str, family: Family, settings: StudySettings) -> Comparison | None:
    """A judge against itself over the answers it judged in two or more runs (the first k runs
    of each, k the fewest runs any such answer has)."""
    repeated = {k: runs for k, runs in collection.by_judge(judge).items() if len(runs) > 1 and _in_family(k, family)}
    if not repeated:
        return None
    k = min(len(runs) for runs in repeated.values())
    table = [[runs[r].values for runs in repeated.values()] for r in range(k)]
    comparison = Comparison(REPEATS, family.name, f"{judge} (run 1)", f"{judge} (runs 2..{k})" if k > 2 else
                            f"{judge} (run 2)")
    comparison.stability = stability_of(table, family.judge_criteria, settings)
    for name, result in comparison.stability.items():
        comparison.skipped[name] = {"unjudged": result.unjudged}
        metric = family.criterion_named(name).metric
        comparison.unjudged |= {(judge, key) for key, runs in repeated.items()
                                if any(run.values.get(metric) is None for run in runs[:k])}
    return comparison


@dataclass
class Study:
    comparisons: list[Comparison]

    def unjudged(self) -> dict[str, int]:
        """Per judge, the compared answers it left undefined on some criterion."""
        answers: dict[str, set[Key]] = {}
        for comparison in self.comparisons:
            for judge, key in comparison.unjudged:
                answers.setdefault(judge, set()).add(key)
        return {judge: len(keys) for judge, keys in sorted(answers.items())}


def pooled_annotators(people: PeopleLabels, family: Family) -> Rater:
    """Every annotator's ratings, each answer and annotator a unit of its own (single ratings:
    kappa is defined), to be resampled by whole answers."""
    raters = [r for r in (annotator_rater(people, a, family) for a in people.annotators) if r.values]
    values = {(*key, annotator): row for annotator, rater in zip(people.annotators, raters) for key, row in
              rater.values.items()}
    points = {(*key, annotator): rated for annotator, rater in zip(people.annotators, raters) for key, rated in
              rater.points.items()}
    return Rater(f"annotators (each of {len(raters)}, pooled)", values, points)


def on_units(judge: Rater, units: Rater) -> Rater:
    """``judge``'s values on the units of ``units`` (its value of each unit's answer)."""
    return Rater(judge.name, {u: judge.values[answer_of(u)] for u in units.values if answer_of(u) in judge.values},
                 {u: judge.points[answer_of(u)] for u in units.points if answer_of(u) in judge.points},
                 judge.integer, judge.fallible)


def annotators_pooled(family: Family, people: PeopleLabels, collection: Collection,
                      settings: StudySettings) -> Comparison:
    """How well the annotators agree with each other, over every pair of two annotators' ratings
    of an answer (and of a reference point), resampled by whole answers."""
    options: _Resampling = {"resamples": settings.resamples, "seed": settings.seed, "confidence": settings.confidence}
    raters = [r for r in (annotator_rater(people, a, family) for a in people.annotators) if r.values]
    comparison = Comparison(ANNOTATORS, family.name, ANNOTATORS_POOLED, f"{len(raters)} annotators")
    keys = sorted({key for rater in raters for key in rater.values})
    for criterion in family.criteria:
        groups: list[list[float]] = []
        clusters: list[int] = []
        for number, key in enumerate(keys):
            given = [value for rater in raters if (value := rater.values.get(key, {}).get(criterion.name)) is not None]
            if len(given) > 1:
                groups.append(given)
                clusters.append(number)
        if groups:
            scale = _integer_scale(criterion.label_scale or criterion.scale, [v for g in groups for v in g])
            comparison.figures[criterion.name] = stats.compare_pairs(groups, clusters, scale, **options)
    if family.points:
        _points_pooled(comparison, raters, keys, collection, options)
    return comparison


def _points_pooled(comparison: Comparison, raters: Sequence[Rater], keys: Sequence[Unit], collection: Collection,
                   options: _Resampling) -> None:
    groups: list[list[float]] = []
    clusters: list[int] = []
    used: list[Key] = []
    for number, key in enumerate(keys):
        rated = [r.points[key] for r in raters if key in r.points]
        if len(rated) < 2:
            continue
        same = [ratings for reference, ratings in rated if reference == rated[0][0]]
        for point in range(len(rated[0][0])):
            given = [float(v) for ratings in same if (v := ratings[point]) is not None]
            if len(given) > 1:
                groups.append(given)
                clusters.append(number)
        used.append(answer_of(key))
    scale = points_criterion_scale(used, collection.distinct())
    if groups and scale is not None:
        comparison.figures[POINTS] = stats.compare_pairs(groups, clusters, scale, **options)


Step = tuple[str, Callable[[], Comparison | None]]


def plan_study(collection: Collection, people: PeopleLabels | None, settings: StudySettings,
               pairwise: bool = False) -> list[Step]:
    """Every comparison the runs and labels allow (see the module docstring), as (what it
    compares, how to compute it): the caller shows progress between them."""
    steps: list[Step] = []
    tasks = {a.task for a in collection.answers if a.judge is not None}
    families = [f for f in (family_of(t) for t in sorted(tasks)) if f is not None]
    for family in dict.fromkeys(families):
        judges = sorted({a.judge for a in collection.answers if a.judge and family_of(a.task) is family})
        if people is not None:
            steps += _people_steps(family, judges, collection, people, settings, pairwise)
        for one, other in itertools.combinations(judges, 2):
            steps.append((f"{family.name} · {JUDGES}: {other} against {one}", partial(
                compare_raters, JUDGES, family, judge_rater(collection, one, family, family.judge_criteria),
                judge_rater(collection, other, family, family.judge_criteria), family.judge_criteria,
                family.main_judged, collection, settings)))
        for judge in judges:
            steps.append((f"{family.name} · {REPEATS}: {judge}",
                          partial(repeats_comparison, collection, judge, family, settings)))
    return steps


def _people_steps(family: Family, judges: Sequence[str], collection: Collection, people: PeopleLabels,
                  settings: StudySettings, pairwise: bool) -> list[Step]:
    steps: list[Step] = []
    humans = people_rater(people, family)
    annotators = [r for r in (annotator_rater(people, a, family) for a in people.annotators) if r.values]
    several = len(annotators) > 1
    pooled = pooled_annotators(people, family) if several else None
    for judge in judges:
        rater = judge_rater(collection, judge, family, family.criteria)
        if humans.values:
            steps.append((f"{family.name} · {JUDGE_PEOPLE}: {judge}", partial(
                compare_raters, JUDGE_PEOPLE, family, humans, rater, family.criteria, family.main, collection,
                settings)))
        if pooled is not None:
            steps.append((f"{family.name} · {JUDGE_ANNOTATOR}: {judge} against {pooled.name}", partial(
                compare_raters, JUDGE_ANNOTATOR, family, pooled, on_units(rater, pooled), family.criteria, None,
                collection, settings, cluster_of=answer_of)))
        if several and pairwise:
            steps += [(f"{family.name} · {JUDGE_ANNOTATOR}: {judge} against {a.name}", partial(
                compare_raters, JUDGE_ANNOTATOR, family, a, rater, family.criteria, family.main, collection,
                settings)) for a in annotators]
        if any(_in_family(first, family) for _, first, _ in people.preferences):
            steps.append((f"{family.name} · {PREFERENCES}: {judge}",
                          partial(compare_preferences, family, people, rater, settings)))
    if several:
        steps.append((f"{family.name} · {ANNOTATORS}: {len(annotators)} annotators against each other",
                      partial(annotators_pooled, family, people, collection, settings)))
    if pairwise:
        steps += [(f"{family.name} · {ANNOTATORS}: {b.name} against {a.name}", partial(
            compare_raters, ANNOTATORS, family, a, b, family.criteria, None, collection, settings))
                  for a, b in itertools.combinations(annotators, 2)]
    return steps


def run_study(collection: Collection, people: PeopleLabels | None, settings: StudySettings, pairwise: bool = False,
              progress: Callable[[int, int, str], None] | None = None) -> Study:
    """Every comparison the runs and labels allow (see the module docstring); ``pairwise``: each
    pair of annotators and each annotator against each judge too; ``progress(done, of, what)``
    is called before each comparison."""
    steps = plan_study(collection, people, settings, pairwise)
    comparisons: list[Comparison] = []
    for number, (what, step) in enumerate(steps):
        if progress is not None:
            progress(number, len(steps), what)
        found = step()
        if found is not None:
            comparisons.append(found)
    return Study(comparisons)
