"""A label template: N answers drawn from the runs, spread over the models, for people to rate.

Only answers a judge gave every value their labels are compared with are drawn (an answer
the judge failed on would cost an annotator's time for no figure). The draw is seeded: each
model's answers are shuffled, then the models take turns, each
giving its next answer to a question not drawn yet; once no such answer is left, to any
question. The template does not say which model wrote an answer (``answer_hash`` identifies
it) or what any judge gave it, so annotators rate blind. It is written twice: JSON Lines
(the documents included, e.g. the reports or the transcript the answer draws on) and CSV
(question, reference and answer beside the columns to fill; a text a spreadsheet would take
for a formula is escaped); either, filled in, is a label file for ``lm-eval-fin agreement
--labels``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_fin.agreement.criteria import FAMILIES, POINTS
from lm_eval_fin.agreement.labels import CSV_COLUMNS
from lm_eval_fin.agreement.matching import Collection, JudgedAnswer, Key
from lm_eval_fin.outputs.records import strict
from lm_eval_fin.plumbing import atomic
from lm_eval_fin.text.csvtext import spreadsheet_safe

JSONL_NAME = "labels_template.jsonl"
CSV_NAME = "labels_template.csv"
FILL_IN = ("annotator",)  # besides the criteria: who rated


def gives_a_value(answer: JudgedAnswer) -> bool:
    """Whether the judge of ``answer`` gave it any value (a judge that failed on it gave none)."""
    family = answer.family
    return any(answer.values.get(c.metric) is not None for c in (*family.criteria, *family.judge_criteria))


def has_needed_values(answer: JudgedAnswer) -> bool:
    """Whether the judge of ``answer`` gave every value people's labels of it are compared with:
    each asked criterion, and for EMS a score of each reference point it extracted (the points
    the template asks people to rate)."""
    family = answer.family
    if answer.judge is None or any(answer.values.get(c.metric) is None for c in family.criteria if c.asked):
        return False
    if family.points:
        points = answer.point_scores()
        return points is not None and all(score is not None for score in points[1])
    return True


def eligible(collection: Collection) -> tuple[dict[Key, JudgedAnswer], int]:
    """The answers a template may draw (each in a judged run that has the values its labels are
    compared with), and how many answers are left out. Runs with no judge at all: every answer
    (they may be judged later, by ``score``)."""
    answers = collection.distinct()
    if not collection.judges:
        return answers, 0
    found: dict[Key, JudgedAnswer] = {}
    for answer in collection.answers:
        if answer.key not in found and has_needed_values(answer):
            found[answer.key] = answer
    return found, len(answers) - len(found)


def draw(candidates: dict[Key, JudgedAnswer], n: int, seed: int) -> list[JudgedAnswer]:
    """``n`` of the ``candidates`` (all, where there are fewer), spread over the models and questions."""
    systems: dict[tuple[str, str], list[JudgedAnswer]] = {}
    for answer in candidates.values():
        systems.setdefault((answer.task, answer.model), []).append(answer)
    rng = np.random.default_rng(seed)
    queues = [[answers[i] for i in rng.permutation(len(answers))] for _, answers in sorted(systems.items())]
    drawn: list[JudgedAnswer] = []
    asked: set[tuple[str, str]] = set()
    for new_questions_only in (True, False):
        progress = True
        while len(drawn) < n and progress:
            progress = False
            for queue in queues:
                if len(drawn) >= n:
                    break
                pick = next((a for a in queue if not new_questions_only or (a.task, a.id) not in asked), None)
                if pick is not None:
                    queue.remove(pick)
                    drawn.append(pick)
                    asked.add((pick.task, pick.id))
                    progress = True
    return drawn


def template_line(answer: JudgedAnswer) -> dict[str, Any]:
    """What an annotator sees and fills for one answer (labels null until rated)."""
    family = answer.family
    labels: dict[str, Any] = {c.name: None for c in family.criteria if c.asked}
    line: dict[str, Any] = {"task": answer.task, "id": answer.id, "answer_hash": answer.key[3], "annotator": "",
                            "labels": labels}
    points = answer.point_scores() if family.points else None
    if points is not None:
        labels[POINTS] = [None] * len(points[0])
        line["reference_points"] = list(points[0])
        line["max_score"] = answer.max_score()
    line["question"] = answer.doc.get("question")
    line["reference"] = answer.doc.get(family.reference_field)
    line["answer"] = answer.text
    line["comment"] = ""
    line["doc"] = {k: v for k, v in answer.doc.items() if k != "settings"}
    return strict(line)


def _csv_columns(lines: Sequence[dict]) -> list[str]:
    criteria = [name for family in FAMILIES for name in family.label_names
                if any(name in line["labels"] for line in lines)]
    rest = [c for c in CSV_COLUMNS if c not in ("task", "id", "model", "answer_hash", *FILL_IN)]
    return ["task", "id", "answer_hash", *FILL_IN, *criteria, *rest]


def _csv_cell(value: Any) -> str:
    """A template cell: text as a spreadsheet shows it and never runs it (a model's answer may be
    ``=HYPERLINK(...)``; the ids are read back through :func:`~lm_eval_fin.text.csvtext.spreadsheet_unescaped`)."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return spreadsheet_safe(json.dumps(value, ensure_ascii=False))
    return spreadsheet_safe(str(value))


def write_template(answers: Sequence[JudgedAnswer], folder: str | Path) -> dict[str, Path]:
    """The template of ``answers`` as JSONL and CSV in ``folder``; the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [template_line(a) for a in answers]
    jsonl = folder / JSONL_NAME
    atomic.write_text(jsonl, "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in lines))
    table = folder / CSV_NAME
    columns = _csv_columns(lines)
    with atomic.open_text(table, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for line in lines:
            cells = {**line, **{k: ("" if k == POINTS else v) for k, v in line["labels"].items()}}
            writer.writerow([_csv_cell(cells.get(c)) for c in columns])
    return {"jsonl": jsonl, "csv": table}
