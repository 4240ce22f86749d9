"""The page's per-question sections and per-subset breakdowns, from the samples the runs logged
and each benchmark's view (:mod:`lm_eval_fin.report.blocks`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.report.blocks import Block, question_title
from lm_eval_fin.report.catalog import DEGENERATE
from lm_eval_fin.report.leaderboard import Column, Leaderboard
from lm_eval_fin.report.rows import Row
from lm_eval_fin.runfiles import Sample


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


@dataclass
class AnswerView:
    row: Row
    sample: Sample
    values: list[tuple[str, float]]  # the sample's defined metric values, in column order
    blocks: list[Block]
    headline: float | None
    degenerate: bool


@dataclass
class QuestionView:
    number: int
    key: str
    title: str
    blocks: list[Block]
    answers: list[AnswerView] = field(default_factory=list)


@dataclass
class TaskAnswers:
    task: str
    slug: str
    rows: list[Row]
    questions: list[QuestionView]
    headline: Column | None  # the metric shown beside each answer in a question's summary


def _safe(view_function: Callable[..., list[Block]], *args: Any) -> list[Block]:
    try:
        return view_function(*args)
    except Exception as exc:  # noqa: BLE001 - one odd sample must not stop the page
        return [Block("text", title="View failed", text=f"{type(exc).__name__}: {exc}", cls="miss")]


def answer_sections(board: Leaderboard) -> list[TaskAnswers]:
    sections = []
    for task in board.tasks:
        view = board.catalog.view(task)
        present = [(row, run.tasks[task]) for row in board.models for run in row.runs
                   if task in run.tasks and run.tasks[task].samples]
        if not present:
            continue
        columns = board.columns_of(task)
        headline = board.headlines.get(task)
        questions: dict[str, QuestionView] = {}
        for row, task_run in present:
            for sample in task_run.samples:
                question = questions.get(sample.key)
                if question is None:
                    question = questions[sample.key] = QuestionView(
                        len(questions) + 1, sample.key, question_title(sample.doc) or sample.key,
                        _safe(view.question, sample),
                    )
                values = [(c.metric, sample.values[c.metric]) for c in columns if c.metric in sample.values]
                question.answers.append(AnswerView(
                    row, sample, values, _safe(view.answer, sample),
                    sample.values.get(headline.metric) if headline else None,
                    sample.values.get(DEGENERATE, 0.0) > 0,
                ))
        sections.append(TaskAnswers(task, slug(task), [row for row, _ in present], list(questions.values()), headline))
    return sections


# ---------------------------------------------------------------------------- breakdowns


@dataclass
class SubsetTable:
    """The headline metric of one task per subset of its questions (e.g. per company)."""

    task: str
    label: str  # what the subsets are
    column: Column
    subsets: list[tuple[str, int]]  # subset value, questions in it
    rows: list[tuple[Row, list[tuple[float, int] | None]]]  # per subset: mean and answers, or None


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def subset_tables(board: Leaderboard) -> dict[str, list[SubsetTable]]:
    """Task -> its breakdowns: per subset function of its view, the headline metric's mean of
    each row (models and baselines) over the questions of each subset."""
    tables: dict[str, list[SubsetTable]] = {}
    for task, column in board.headlines.items():
        subsets = board.catalog.view(task).subsets
        if not subsets:
            continue
        samples = board.samples(task)
        for label, subset_of in subsets.items():
            members: dict[str, list[str]] = {}
            for sample in samples:
                try:
                    value = subset_of(sample.doc)
                except Exception:  # noqa: BLE001 - a document without the field is in no subset
                    value = None
                if value:
                    members.setdefault(str(value), []).append(sample.key)
            if len(members) < 2:
                continue  # one subset says nothing the leaderboard does not
            names = sorted(members)
            rows = []
            for row in board.rows:
                cell = row.cells.get(column.key)
                if not cell or not cell.values:
                    continue
                per_subset: list[tuple[float, int] | None] = []
                for name in names:
                    found = [cell.values[key] for key in members[name] if key in cell.values]
                    mean = _mean(found)
                    per_subset.append(None if mean is None else (mean, len(found)))
                rows.append((row, per_subset))
            if rows:
                tables.setdefault(task, []).append(
                    SubsetTable(task, label, column, [(name, len(members[name])) for name in names], rows))
    return tables
