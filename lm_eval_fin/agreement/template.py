"""A label template: N answers drawn from the runs, spread over the models, for people to rate.

The draw is seeded: each model's answers are shuffled, then the models take turns, each
giving its next answer to a question not drawn yet; once no such answer is left, to any
question. The template does not say which model wrote an answer (``answer_hash`` identifies
it) or what any judge gave it, so annotators rate blind. It is written twice: JSON Lines
(the documents included, e.g. the reports or the transcript the answer draws on) and CSV
(question, reference and answer beside the columns to fill); either, filled in, is a label
file for ``lm-eval-fin agreement --labels``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_fin import atomic
from lm_eval_fin.agreement.criteria import FAMILIES, POINTS
from lm_eval_fin.agreement.labels import CSV_COLUMNS
from lm_eval_fin.agreement.matching import Collection, JudgedAnswer
from lm_eval_fin.records import strict

JSONL_NAME = "labels_template.jsonl"
CSV_NAME = "labels_template.csv"
FILL_IN = ("annotator",)  # besides the criteria: who rated


def draw(collection: Collection, n: int, seed: int) -> list[JudgedAnswer]:
    """``n`` answers (all, where there are fewer), spread over the models and questions."""
    systems: dict[tuple[str, str], list[JudgedAnswer]] = {}
    for answer in collection.distinct().values():
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
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


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
