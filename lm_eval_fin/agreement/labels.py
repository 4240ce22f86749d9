"""People's labels, read from a JSON Lines file (or the CSV of a label template): one line per
answer and annotator, or one line per preference between two answers. docs/agreement.md
describes the format; in short::

    {"task": "fin_lfqa", "id": "<doc id>", "model": "<model>", "answer_hash": "<from the template>",
     "annotator": "a1", "labels": {"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}}
    {"task": "fin_ems", "id": "...", "model": "...", "labels": {"ems": 7, "points": [10, 0, 6]},
     "reference_points": ["...", "...", "..."]}
    {"task": "fin_lfqa", "id": "...", "models": ["model A", "model B"], "preferred": "model A"}

``id`` is the document's id (``doc["id"]``); ``task``, ``model`` and ``answer_hash`` are needed
only where the id alone does not pick one answer out of the runs. A label left null is not
given (a template line nobody filled is skipped); other keys (the question, the answer) are
ignored. This module checks the shape of each line; whether its criteria and values fit the
task is checked when it is matched to an answer (:mod:`lm_eval_fin.agreement.matching`).
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.agreement.criteria import FAMILIES, POINTS
from lm_eval_fin.plumbing.jsonl import read_jsonl
from lm_eval_fin.text.csvtext import spreadsheet_unescaped

TIE = "tie"
HASH_CHARS = 16
# CSV columns that are not criteria (the template's context and the answer's identity)
CSV_COLUMNS = ("task", "id", "model", "answer_hash", "annotator", "question", "reference", "answer",
               "reference_points", "comment")
CSV_IDENTITY = ("task", "id", "model", "answer_hash", "annotator")  # read back as the template wrote them


class LabelError(ValueError):
    """A label file that cannot be used; the message names the file and line and what is wrong."""


def answer_hash(task: str, doc_id: str, model: str, text: str) -> str:
    """An answer's id in label files, which does not show the model (a label template hides who
    wrote each answer from its annotators): the first 16 hex digits of the SHA-256 of its task,
    document id, model and text."""
    identity = "\n".join((task, doc_id, model, text))
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:HASH_CHARS]


@dataclass(frozen=True)
class AnswerRef:
    """Which answer a line is about: the document id, and what narrows it down where needed."""

    id: str
    task: str | None = None
    model: str | None = None
    answer_hash: str | None = None

    def describe(self) -> str:
        parts = [f"id {self.id!r}"] + [f"{k} {v!r}" for k, v in (("task", self.task), ("model", self.model),
                                                                ("answer_hash", self.answer_hash)) if v]
        return ", ".join(parts)


@dataclass(frozen=True)
class Label:
    """One annotator's ratings of one answer. ``points``: a rating (or None) per reference point."""

    where: str
    answer: AnswerRef
    annotator: str
    scores: dict[str, float]
    points: tuple[int | None, ...] | None = None
    reference_points: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Preference:
    """One annotator's choice between two answers to the same question: ``preferred`` is +1
    (the first), -1 (the second) or 0 (a tie)."""

    where: str
    first: AnswerRef
    second: AnswerRef
    preferred: int
    criterion: str | None
    annotator: str


def _text(value: Any, where: str, key: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise LabelError(f"{where}: '{key}' must be text, got {json.dumps(value)[:60]}")
    return str(value)


def _required_text(value: Any, where: str, key: str) -> str:
    text = _text(value, where, key)
    if text is None:
        raise LabelError(f"{where}: '{key}' is missing")
    return text


def _number(value: Any, where: str, key: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise LabelError(f"{where}: label {key!r} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        raise LabelError(f"{where}: label {key!r} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _points(value: Any, where: str) -> tuple[int | None, ...] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text) if text.startswith("[") else [p.strip() or None for p in text.split(";")]
        except json.JSONDecodeError:
            raise LabelError(f"{where}: 'points' must be a list of ratings (JSON, or separated by ';')") from None
    if not isinstance(value, list):
        raise LabelError(f"{where}: 'points' must be a list with one rating per reference point")
    ratings = [_number(v, where, POINTS) for v in value]
    if any(r is not None and r != int(r) for r in ratings):
        raise LabelError(f"{where}: 'points' ratings must be integers")
    if all(r is None for r in ratings):
        return None
    return tuple(None if r is None else int(r) for r in ratings)


def _reference_points(value: Any, where: str) -> tuple[str, ...] | None:
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise LabelError(f"{where}: 'reference_points' must be a JSON list of texts") from None
    if value is None or value == "":
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise LabelError(f"{where}: 'reference_points' must be a list of texts")
    return tuple(value)


def _answer_ref(line: dict, where: str) -> AnswerRef:
    return AnswerRef(
        id=_required_text(line.get("id"), where, "id"),
        task=_text(line.get("task"), where, "task"),
        model=_text(line.get("model"), where, "model"),
        answer_hash=_text(line.get("answer_hash"), where, "answer_hash"),
    )


def _preference(line: dict, where: str) -> Preference:
    models, hashes = line.get("models"), line.get("answer_hashes") or [None, None]
    if not (isinstance(models, list) and len(models) == 2 and all(isinstance(m, str) and m for m in models)):
        raise LabelError(f"{where}: a preference needs 'models': the two models whose answers were compared")
    if models[0] == models[1]:
        raise LabelError(f"{where}: a preference compares two different models, got {models[0]!r} twice")
    if not (isinstance(hashes, list) and len(hashes) == 2):
        raise LabelError(f"{where}: 'answer_hashes' must list the two answers' hashes, in the order of 'models'")
    preferred = line.get("preferred")
    choices = {models[0]: 1, models[1]: -1, TIE: 0}
    if preferred not in choices:
        raise LabelError(f"{where}: 'preferred' must be one of {list(choices)}, got {json.dumps(preferred)[:60]}")
    base = _answer_ref(line, where)
    return Preference(
        where=where,
        first=AnswerRef(base.id, base.task, models[0], _text(hashes[0], where, "answer_hashes")),
        second=AnswerRef(base.id, base.task, models[1], _text(hashes[1], where, "answer_hashes")),
        preferred=choices[preferred],
        criterion=_text(line.get("criterion"), where, "criterion"),
        annotator=_text(line.get("annotator"), where, "annotator") or "",
    )


def _label(line: dict, where: str) -> Label | None:
    """The label of one line; None for a line with every rating left blank."""
    labels = line.get("labels")
    if not isinstance(labels, dict):
        raise LabelError(f"{where}: 'labels' must be an object of criterion: rating (or a preference line "
                         "with 'models' and 'preferred')")
    scores = {str(k): _number(v, where, str(k)) for k, v in labels.items() if k != POINTS}
    points = _points(labels.get(POINTS), where)
    reference_points = _reference_points(line.get("reference_points"), where)
    if points is not None:
        if reference_points is None:
            raise LabelError(f"{where}: 'points' ratings need 'reference_points', the points they rate (from "
                             "the label template)")
        if len(points) != len(reference_points):
            raise LabelError(f"{where}: {len(points)} 'points' ratings for {len(reference_points)} reference points")
    given = {k: v for k, v in scores.items() if v is not None}
    if not given and points is None:
        return None
    return Label(where, _answer_ref(line, where), _text(line.get("annotator"), where, "annotator") or "",
                 given, points, reference_points)


def _parse_line(line: Any, where: str) -> Label | Preference | None:
    if not isinstance(line, dict):
        raise LabelError(f"{where}: a label line must be a JSON object")
    return _preference(line, where) if "preferred" in line else _label(line, where)


def _csv_lines(path: Path) -> list[tuple[str, dict]]:
    known = {name for family in FAMILIES for name in family.label_names}
    # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark, which is no part of the first column's name
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        unknown = [c for c in columns if c not in known and c not in CSV_COLUMNS]
        if unknown:
            raise LabelError(f"{path}: unknown column(s) {unknown}; criteria are {sorted(known)}, other columns "
                             f"{list(CSV_COLUMNS)}")
        if "id" not in columns:
            raise LabelError(f"{path}: no 'id' column")
        lines = []
        for number, row in enumerate(reader, start=2):
            line: dict[str, Any] = {k: spreadsheet_unescaped(v) if k in CSV_IDENTITY and isinstance(v, str) else v
                                    for k, v in row.items() if k in CSV_COLUMNS}
            line["labels"] = {k: v for k, v in row.items() if k in known}
            lines.append((f"{path}:{number}", line))
    return lines


def read_labels(path: str | Path) -> tuple[list[Label], list[Preference], int]:
    """The labels and preferences of a JSONL (or template CSV) label file, and how many lines
    were left blank. Raises :class:`LabelError` (one line, naming file:line) for a bad file."""
    path = Path(path)
    if not path.exists() or path.is_dir():
        raise LabelError(f"{path}: no such label file")
    try:
        lines = _csv_lines(path) if path.suffix.lower() == ".csv" else list(read_jsonl(path, LabelError))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LabelError(f"{path}: cannot read ({exc})") from None
    labels, preferences, blank = [], [], 0
    for where, line in lines:
        parsed = _parse_line(line, where)
        if parsed is None:
            blank += 1
        elif isinstance(parsed, Preference):
            preferences.append(parsed)
        else:
            labels.append(parsed)
    if not labels and not preferences:
        raise LabelError(f"{path}: no label is filled in ({blank} blank lines)")
    return labels, preferences, blank
