"""The page's per-question sections and per-subset breakdowns, from the samples the runs logged
and each benchmark's view (:mod:`lm_eval_fin.report.blocks`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.outputs.runfiles import Sample
from lm_eval_fin.report.blocks import Block, View, question_title
from lm_eval_fin.report.catalog import DEGENERATE
from lm_eval_fin.report.leaderboard import Column, Leaderboard
from lm_eval_fin.report.rows import Row


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


# questions per answers page: with a hundred rows, 25 questions make a page of a few megabytes
QUESTIONS_PER_PAGE = 25
# answers of a question above which its summary line says how many and their mean, not a chip each
CHIP_LIMIT = 12


def page_of(task: str, part: int = 0) -> str:
    """The file of a task's answers page (``part``: its n-th page of questions), beside index.html."""
    return f"answers-{slug(task)}.html" if part == 0 else f"answers-{slug(task)}-{part + 1}.html"


def _safe(view_function: Callable[..., list[Block]], *args: Any) -> list[Block]:
    try:
        return view_function(*args)
    except Exception as exc:  # noqa: BLE001 - one odd sample must not stop the page
        return [Block("text", title="View failed", text=f"{type(exc).__name__}: {exc}", cls="miss")]


@dataclass
class AnswerView:
    row: Row
    sample: Sample
    values: list[tuple[str, float]]  # the sample's defined metric values, in column order
    headline: float | None
    degenerate: bool
    view: View

    @property
    def blocks(self) -> list[Block]:
        """Made when its page is rendered (a page's answers at a time, never the whole board's)."""
        return _safe(self.view.answer, self.sample)


@dataclass
class QuestionView:
    number: int
    key: str
    title: str
    sample: Sample  # the first answer's: the question as logged
    view: View
    answers: list[AnswerView] = field(default_factory=list)

    @property
    def blocks(self) -> list[Block]:
        return _safe(self.view.question, self.sample)

    @property
    def mean_headline(self) -> float | None:
        """The mean of the answers' headline values (None without one)."""
        return _mean([answer.headline for answer in self.answers if answer.headline is not None])


@dataclass
class TaskAnswers:
    task: str
    slug: str
    rows: list[Row]
    questions: list[QuestionView]
    headline: Column | None  # the metric shown beside each answer in a question's summary

    @property
    def page(self) -> str:
        return page_of(self.task)

    @property
    def pages(self) -> list[tuple[str, int, int]]:
        """(file, first question number, last) of each of its pages."""
        return [(page_of(self.task, n), start + 1, min(start + QUESTIONS_PER_PAGE, len(self.questions)))
                for n, start in enumerate(range(0, max(len(self.questions), 1), QUESTIONS_PER_PAGE))]

    def part(self, n: int) -> list[QuestionView]:
        return self.questions[n * QUESTIONS_PER_PAGE:(n + 1) * QUESTIONS_PER_PAGE]


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
                        len(questions) + 1, sample.key, question_title(sample.doc) or sample.key, sample, view)
                values = [(c.metric, sample.values[c.metric]) for c in columns if c.metric in sample.values]
                question.answers.append(AnswerView(
                    row, sample, values, sample.values.get(headline.metric) if headline else None,
                    sample.values.get(DEGENERATE, 0.0) > 0, view,
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
