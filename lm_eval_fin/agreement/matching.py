"""Judged runs and labels brought together: every answer of every run (through
:mod:`lm_eval_fin.outputs.runfiles`, the one reader of lm-eval's output folders), who judged it, and
which answer each label is about.

An answer is one model's answer to one question of one task, identified by (task, document
id, model, answer hash): the same answer judged by two judges, or twice by one, is the same
answer. A judge is the judge spec in the documents' settings (and the prompt version in the
records, where one spec ran with two versions); runs without a judge are left out of the
comparisons (where no run has a judge, their answers can still go into a label template).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.agreement.criteria import Criterion, Family, Scale, family_of, points_scale
from lm_eval_fin.agreement.labels import AnswerRef, Label, LabelError, Preference, answer_hash
from lm_eval_fin.outputs.runfiles import Unreadable, read_results_dirs

Key = tuple[str, str, str, str]  # task, document id, model, answer hash
EMS_SCORER = "llm"  # the EMS scorer whose per-point scores people's point ratings are read against


@dataclass
class JudgedAnswer:
    """One answer as one run logged it: its judge (None: the run had none) and per-sample values."""

    task: str
    id: str
    model: str
    text: str
    judge: str | None
    values: dict[str, float]
    record: dict[str, Any]
    settings: dict[str, Any]
    doc: dict[str, Any]
    source: str

    @property
    def key(self) -> Key:
        return self.task, self.id, self.model, answer_hash(self.task, self.id, self.model, self.text)

    @property
    def family(self) -> Family:
        family = family_of(self.task)
        assert family is not None, "only answers of a family are collected"
        return family

    def max_score(self) -> int | None:
        """fin_ems: the top of the judge's 0..max_score point scale, from the run's settings."""
        value = (self.settings.get("values") or {}).get("max_score")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def point_scores(self) -> tuple[tuple[str, ...], tuple[float | None, ...]] | None:
        """fin_ems: the judge's reference points and its score s_i of each on 0..max_score (None
        where it left a point unjudged); None where the record holds no points."""
        ems, top = self.record.get("ems"), self.max_score()
        if not isinstance(ems, dict) or top is None:
            return None
        points, scores = ems.get("reference_points"), (ems.get("scores") or {}).get(EMS_SCORER)
        if not isinstance(points, list) or not isinstance(scores, list) or len(points) != len(scores):
            return None
        as_scale = [None if not isinstance(s, (int, float)) or isinstance(s, bool) else round(s * top, 6)
                    for s in scores]
        return tuple(str(p) for p in points), tuple(as_scale)


@dataclass
class Judge:
    name: str
    spec: str
    prompt_version: Any
    options: dict[str, Any]
    sources: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "spec": self.spec, "prompt_version": self.prompt_version,
                "options": self.options, "runs": self.sources}


@dataclass
class Collection:
    """Everything read from the runs: the answers (in run order), the judges, what could not be
    read, and notes on what was left out."""

    answers: list[JudgedAnswer]
    judges: dict[str, Judge]
    unreadable: list[Unreadable]
    notes: list[str] = field(default_factory=list)

    def by_judge(self, judge: str) -> dict[Key, list[JudgedAnswer]]:
        """The answers ``judge`` judged, each with its runs in order (more than one: repeats)."""
        found: dict[Key, list[JudgedAnswer]] = {}
        for answer in self.answers:
            if answer.judge == judge:
                found.setdefault(answer.key, []).append(answer)
        return found

    def distinct(self) -> dict[Key, JudgedAnswer]:
        """Each answer once (its first run)."""
        found: dict[Key, JudgedAnswer] = {}
        for answer in self.answers:
            found.setdefault(answer.key, answer)
        return found


def _judge_identity(settings: dict, record: dict) -> tuple[str, Any] | None:
    """(judge spec, prompt version) of a logged answer; None where its run had no judge."""
    spec = settings.get("judge")
    if not isinstance(spec, str) or not spec:
        return None
    judge = record.get("judge")
    return spec, judge.get("prompt_version") if isinstance(judge, dict) else None


def _judges(identities: dict[tuple[str, Any], tuple[dict, list[str]]]) -> dict[tuple[str, Any], Judge]:
    """A name for each judge: its spec, with the prompt version where one spec ran with several."""
    specs = [spec for spec, _ in identities]
    return {
        (spec, version): Judge(spec if specs.count(spec) == 1 else f"{spec} (prompt {version})", spec, version,
                               dict(options), sources)
        for (spec, version), (options, sources) in identities.items()
    }


def collect(paths: Iterable[str]) -> Collection:
    """The answers of every fin_lfqa and fin_ems task in the runs under ``paths``."""
    runs, unreadable = read_results_dirs(paths)
    read: list[tuple[JudgedAnswer, tuple[str, Any] | None]] = []
    identities: dict[tuple[str, Any], tuple[dict, list[str]]] = {}
    notes: list[str] = []
    for run in runs:
        for task, task_run in run.tasks.items():
            if family_of(task) is None:
                continue
            if not task_run.logged:
                notes.append(f"{run.source}: {task} has no samples (run lm_eval with --log_samples); left out")
                continue
            for sample in task_run.samples:
                settings = sample.settings
                identity = _judge_identity(settings, sample.record)
                read.append((JudgedAnswer(task, sample.key, run.model, sample.answer, None, dict(sample.values),
                                          sample.record, settings, sample.doc, str(run.source)), identity))
                if identity is not None:
                    _, sources = identities.setdefault(identity, (settings.get("judge_options") or {}, []))
                    if str(run.source) not in sources:
                        sources.append(str(run.source))
    judges = _judges(identities)
    for answer, identity in read:
        answer.judge = None if identity is None else judges[identity].name
    if any(identity is None for _, identity in read):
        notes.append("some runs had no judge (settings judge null): their answers are not compared")
    return Collection([answer for answer, _ in read], {j.name: j for j in judges.values()}, unreadable, notes)


# ------------------------------------------------------------------------------ labels


def resolve(ref: AnswerRef, where: str, index: dict[str, list[Key]]) -> Key:
    """The one answer a label line is about; a :class:`LabelError` when none or several fit."""
    keys = [k for k in index.get(ref.id, []) if (ref.task is None or k[0] == ref.task)
            and (ref.model is None or k[2] == ref.model) and (ref.answer_hash is None or k[3] == ref.answer_hash)]
    if not keys:
        known = "" if ref.id in index else " (no run holds that document id)"
        raise LabelError(f"{where}: no answer in the runs fits {ref.describe()}{known}")
    if len(keys) > 1:
        models = sorted({k[2] for k in keys})
        tasks = sorted({k[0] for k in keys})
        raise LabelError(f"{where}: {ref.describe()} fits {len(keys)} answers (tasks {tasks}, models {models}); "
                         "add 'task', 'model' or 'answer_hash' to pick one")
    return keys[0]


def key_index(keys: Iterable[Key]) -> dict[str, list[Key]]:
    index: dict[str, list[Key]] = {}
    for key in keys:
        index.setdefault(key[1], []).append(key)
    return index


def _check_value(label: Label, criterion: Criterion, value: float, family: Family) -> None:
    scale = criterion.label_scale
    if scale is None:
        raise LabelError(f"{label.where}: {criterion.name!r} is derived, not labelled; {family.name} labels are "
                         f"{family.label_names}")
    if not scale.low <= value <= scale.high or (scale.ordinal and value != int(value)):
        kind = "an integer " if scale.ordinal else ""
        raise LabelError(f"{label.where}: {criterion.name} = {value:g} is not {kind}in {scale.low:g}..{scale.high:g}")


def checked_scores(label: Label, answer: JudgedAnswer) -> dict[str, float]:
    """The label's ratings checked against its task's criteria and scales, with ``overall`` (the
    sum of FinLFQA's three criteria) added where it is not given; fin_ems ``recall`` from points."""
    family = answer.family
    names = [c.name for c in family.criteria]
    scores = dict(label.scores)
    for name, value in scores.items():
        if name not in names:
            raise LabelError(f"{label.where}: unknown criterion {name!r} for {answer.task}; its labels are "
                             f"{family.label_names}")
        _check_value(label, family.criterion(name), value, family)
    if label.points is not None:
        if not family.points:
            raise LabelError(f"{label.where}: unknown criterion 'points' for {answer.task}; its labels are "
                             f"{family.label_names}")
        top = answer.max_score()
        if top is None:
            raise LabelError(f"{label.where}: the run of this answer does not say the judge's max_score, which "
                             "point ratings are on")
        for rating in label.points:
            if rating is not None and not 0 <= rating <= top:
                raise LabelError(f"{label.where}: point rating {rating} is not an integer in 0..{top} (max_score)")
        given = [rating for rating in label.points if rating is not None]
        if given and len(given) == len(label.points):
            scores["recall"] = sum(given) / (top * len(given))
    parts = [c.name for c in family.criteria if c.asked]
    if family.total and all(p in scores for p in parts):
        total = sum(scores[p] for p in parts)
        if family.total in scores and scores[family.total] != total:
            raise LabelError(f"{label.where}: {family.total} = {scores[family.total]:g} but {', '.join(parts)} sum to "
                             f"{total:g}")
        scores[family.total] = total
    return scores


@dataclass
class PeopleLabels:
    """Labels resolved to answers: per annotator, per answer, the checked ratings and point
    ratings (with the reference points they rate)."""

    scores: dict[str, dict[Key, dict[str, float]]] = field(default_factory=dict)
    points: dict[str, dict[Key, tuple[tuple[str, ...], tuple[int | None, ...]]]] = field(default_factory=dict)
    preferences: list[tuple[Preference, Key, Key]] = field(default_factory=list)

    @property
    def annotators(self) -> list[str]:
        return sorted(set(self.scores) | set(self.points))


def match_labels(labels: Sequence[Label], preferences: Sequence[Preference], collection: Collection) -> PeopleLabels:
    """Each label on the answer it is about, checked; :class:`LabelError` for the first that is
    not about exactly one answer of the runs, names an unknown criterion or rates out of range."""
    answers = collection.distinct()
    index = key_index(answers)
    people = PeopleLabels()
    for label in labels:
        key = resolve(label.answer, label.where, index)
        scores = checked_scores(label, answers[key])
        mine = people.scores.setdefault(label.annotator, {})
        if key in mine or key in people.points.get(label.annotator, {}):
            who = f"annotator {label.annotator!r}" if label.annotator else "the same annotator"
            raise LabelError(f"{label.where}: a second label of {who} for {label.answer.describe()}; name each "
                             "annotator in 'annotator'")
        mine[key] = scores
        if label.points is not None:
            people.points.setdefault(label.annotator, {})[key] = (label.reference_points or (), label.points)
    for preference in preferences:
        first = resolve(preference.first, preference.where, index)
        second = resolve(preference.second, preference.where, index)
        if first[:2] != second[:2]:
            raise LabelError(f"{preference.where}: a preference compares two answers to the same question of one task")
        family = answers[first].family
        criterion = preference.criterion or family.main
        if criterion not in [c.name for c in family.criteria if c.label_scale is not None]:
            raise LabelError(f"{preference.where}: unknown criterion {criterion!r} for {first[0]}; preferences can "
                             f"be on {[c.name for c in family.criteria if c.label_scale is not None]}")
        people.preferences.append((preference, first, second))
    return people


def points_criterion_scale(keys: Iterable[Key], answers: dict[Key, JudgedAnswer]) -> Scale | None:
    """The 0..max_score scale of point ratings of these answers; None when their runs differ."""
    tops = {answers[k].max_score() for k in keys}
    top = tops.pop() if len(tops) == 1 else None
    return points_scale(top) if top is not None else None

