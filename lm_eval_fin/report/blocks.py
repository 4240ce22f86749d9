"""The building blocks of a benchmark's report view, and the generic view.

A benchmark's view (``lm_eval_fin/benchmarks/<name>/view.py``, attached to its ``Benchmark``)
is a :class:`View`: what the page shows of one question and of one answer, as plain
:class:`Block` data (the template escapes every text, so a view never writes markup), plus
what the leaderboard needs from the benchmark alone:

* ``baselines``: rows computed without a model on the documents the runs logged (an answer in
  the input order, a question echo...), scored by the benchmark's own scoring functions;
* ``references``: figures reported in the papers, for the metrics whose definition is ours;
* ``subsets``: per-subset breakdowns, each a function of a document (its company, its type);
* ``diagnostics``: metric names (regular expressions) that describe how a run went rather than
  how good its answers are (shown in the diagnostics view, never plotted as scores).

Nothing here imports more than the core: a benchmark's task module imports its view.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.outputs.runfiles import Sample

HIT, MISS, NOTE = "hit", "miss", "note"


@dataclass
class Cell:
    text: str
    cls: str = ""  # HIT, MISS, NOTE or ""


@dataclass
class Block:
    """``kind``: "text" (a text kept as written), "facts" (label: value pairs), "table"
    (header and rows of cells; a cell of class "code" is a snippet)."""

    kind: str
    title: str = ""
    text: str = ""
    items: list[tuple[str, str]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)
    cls: str = ""


def show(value: Any) -> str:
    """A value as a view prints it: numbers to 4 significant digits, nothing as a dash (a
    number that is not finite is not a figure either)."""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else "—"
    if value is None:
        return "—"
    return str(value)


def text_block(title: str, text: str, cls: str = "") -> Block:
    return Block("text", title=title, text=text, cls=cls)


def facts_block(title: str, items: Sequence[tuple[str, Any]]) -> Block:
    return Block("facts", title=title, items=[(str(k), show(v)) for k, v in items])


def table_block(title: str, header: Sequence[str], rows: Sequence[Sequence[Cell | str]]) -> Block:
    return Block(
        "table", title=title, header=list(header),
        rows=[[c if isinstance(c, Cell) else Cell(str(c)) for c in row] for row in rows],
    )


def json_field(doc: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A document field that the task keeps as JSON text (lm-eval logs docs as they are)."""
    value = doc.get(name)
    if not isinstance(value, str):
        return value if value is not None else default
    try:
        return json.loads(value) if value else default
    except ValueError:
        return default


def question_text(doc: Mapping[str, Any]) -> str:
    for key in ("question", "query", "input", "problem"):
        if isinstance(doc.get(key), str):
            return doc[key]
    return ""


def question_title(doc: Mapping[str, Any], limit: int = 140) -> str:
    """A one-line title for a question: its text, or the question line of a prompt."""
    text = question_text(doc)
    if not text and isinstance(doc.get("prompt"), str):
        match = re.search(r"Question:\s*(.+)", doc["prompt"])
        text = match.group(1) if match else doc["prompt"]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answer_block(sample: Sample) -> Block:
    return text_block("Answer", sample.answer or "(empty)")


# ------------------------------------------------------------------------ what a view holds


@dataclass(frozen=True)
class Baseline:
    """A row computed without a model: ``values[question key][metric]`` for the questions the
    runs logged. ``name`` is the row's label; ``description`` says how its answers were made."""

    name: str
    description: str
    values: Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Reference:
    """Figures a paper reports for one model and setting, on our metric names and scale.
    ``tasks``: the tasks whose columns they go in. ``note``: what differs from our runs."""

    paper: str  # e.g. "FinCARDS (Zhou et al. 2026), Table 1"
    model: str
    setting: str
    split: str
    tasks: tuple[str, ...]
    values: Mapping[str, float]
    note: str = ""
    bertscore_model: str = ""  # the paper's BERTScore model where it names one ("" where it does not)

    @property
    def label(self) -> str:
        return f"{self.model} · reported in {self.paper}"


def _generic_question(sample: Sample) -> list[Block]:
    doc = sample.doc
    text = question_text(doc) or doc.get("prompt") or json.dumps(doc, ensure_ascii=False)[:4000]
    return [text_block("Question", str(text))]


def _generic_answer(sample: Sample) -> list[Block]:
    return [answer_block(sample)]


def _no_baselines(task: str, samples: Sequence[Sample]) -> list[Baseline]:
    return []


@dataclass(frozen=True)
class View:
    """What the report shows of one benchmark beyond its figures (see the module docstring).
    ``references_note`` names the papers' metrics left out because their definition is not ours."""

    question: Callable[[Sample], list[Block]] = _generic_question
    answer: Callable[[Sample], list[Block]] = _generic_answer
    baselines: Callable[[str, Sequence[Sample]], list[Baseline]] = _no_baselines
    references: tuple[Reference, ...] = ()
    references_note: str = ""
    subsets: Mapping[str, Callable[[Mapping[str, Any]], str | None]] = field(default_factory=dict)
    diagnostics: tuple[str, ...] = ()


GENERIC = View()
