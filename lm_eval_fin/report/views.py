"""Per-benchmark views: what the report shows of one question and of one run's answer.

Each benchmark has a :class:`View`, found by task-name prefix (:func:`view_for`): ``fin_ems``,
``fin_lfqa``, ``fin_agentbench``; any other task gets the generic view. A view

* ``attach``: reads what the benchmark leaves beside lm-eval's files (EMS details, the
  judge details of ``lm-eval-fin score``) into the samples: per-document values of metrics
  lm-eval logs only as corpus items, details for the answer view, provenance;
* ``question``: blocks shown once per question (the question, the reference);
* ``answer``: blocks shown per run (the answer and how it was scored).

Blocks are plain data (:class:`Block`); the template renders them, escaping every text, so a
view never writes markup. The view functions are small and self-contained so that each can
move beside its benchmark.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin.cleantext import read_answer
from lm_eval_fin.report.runs import Run, Sample, TaskRun, as_float

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


def text_block(title: str, text: str, cls: str = "") -> Block:
    return Block("text", title=title, text=text, cls=cls)


def facts_block(title: str, items: Sequence[tuple[str, Any]]) -> Block:
    return Block("facts", title=title, items=[(str(k), _show(v)) for k, v in items])


def table_block(title: str, header: Sequence[str], rows: Sequence[Sequence[Cell | str]]) -> Block:
    return Block(
        "table", title=title, header=list(header),
        rows=[[c if isinstance(c, Cell) else Cell(str(c)) for c in row] for row in rows],
    )


def _show(value: Any) -> str:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.4g}"
    if value is None:
        return "—"
    return str(value)


@dataclass
class ViewOptions:
    execute_code: bool = False  # FinLFQA: run the answers' snippets in the sandbox


@dataclass(frozen=True)
class View:
    name: str
    attach: Callable[[TaskRun, Run], None]
    question: Callable[[Sample], list[Block]]
    answer: Callable[[Sample, dict], list[Block]]
    # runs once over all samples of the benchmark before any answer view: shared work (code runs)
    prepare: Callable[[list[Sample], ViewOptions], dict] = lambda samples, options: {}
    # the metric shown beside each run in a question's summary: the first name matching
    headline: tuple[str, ...] = ()

    def headline_of(self, metrics: Sequence[str], with_values: set[str]) -> str | None:
        """The headline metric among ``metrics``: the first matching one of :attr:`headline`
        with per-sample values, else the first metric with per-sample values."""
        candidates = [m for m in metrics if m in with_values]
        for pattern in self.headline:
            found = next((m for m in candidates if re.fullmatch(pattern, m)), None)
            if found:
                return found
        return candidates[0] if candidates else None


def _question_text(doc: dict) -> str:
    for key in ("question", "query", "input", "problem"):
        if isinstance(doc.get(key), str):
            return doc[key]
    return ""


def question_title(doc: dict, limit: int = 140) -> str:
    """A one-line title for a question: its text, or the question line of a prompt."""
    text = _question_text(doc)
    if not text and isinstance(doc.get("prompt"), str):
        match = re.search(r"Question:\s*(.+)", doc["prompt"])
        text = match.group(1) if match else doc["prompt"]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------- generic


def _generic_attach(task_run: TaskRun, run: Run) -> None:
    return None


def _generic_question(sample: Sample) -> list[Block]:
    text = _question_text(sample.doc) or sample.doc.get("prompt") or json.dumps(sample.doc, ensure_ascii=False)[:4000]
    return [text_block("Question", str(text))]


def _generic_answer(sample: Sample, context: dict) -> list[Block]:
    return [text_block("Answer", sample.answer or "(empty)")]


GENERIC = View("generic", _generic_attach, _generic_question, _generic_answer)


# ---------------------------------------------------------------------------------- fin_ems

EMS_METRIC = re.compile(r"^ems_(?:(?P<offline>offline)_)?(?P<scorer>llm|rouge|bertscore)_(?P<part>precision|recall|f1)$")
EMS_PARTS = ("precision", "recall", "f1")


def _ems_details_folders(run: Run) -> list[Path]:
    """Where ``lm-eval-fin run --output_path OUT`` puts them: ``OUT/ems_details``; lm-eval's
    files are in ``OUT/<model dir>/``."""
    here = run.source.parent
    folders = [here.parent / "ems_details", here / "ems_details", run.results_dir / "ems_details"]
    return list(dict.fromkeys(f for f in folders if f.is_dir()))


def find_ems_details(task_run: TaskRun, run: Run) -> tuple[dict | None, str]:
    """(the EMS details of this run, how they were found): the file whose documents are this
    run's, by id and answer (fin_ems writes both into each document; answers compared as the
    parsers read them)."""
    folders = _ems_details_folders(run)
    if not folders:
        return None, "no ems_details folder beside the run (written by `lm-eval-fin run --output_path`)"
    wanted = sorted((str(s.doc.get("id")), read_answer(s.answer)[0]) for s in task_run.samples)
    matches = []
    for folder in folders:
        for path in sorted(folder.glob("fin_ems-*.json")):
            try:
                details = json.loads(path.read_text(encoding="utf-8"))
                found = sorted((str(d.get("id")), str(d.get("answer"))) for d in details["documents"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            if found == wanted:
                matches.append((path, details))
    if not matches:
        return None, f"no EMS details file holds this run's documents and answers in {', '.join(map(str, folders))}"
    # the same answers scored more than once (offline, then with a judge): the newest file
    path, details = max(matches, key=lambda match: match[0].stat().st_mtime)
    return details, f"{path.name} (matched by document ids and answers)"


def ems_values(document: dict, metric_names: Sequence[str], method: str | None) -> dict[str, float]:
    """Per-document values of the EMS metrics (and whole-answer BERTScore) from one EMS
    details document. ``method``: "offline", "llm", or None to fill both kinds of names."""
    values: dict[str, float] = {}
    ems = document.get("ems") if isinstance(document.get("ems"), dict) else {}
    for name in metric_names:
        match = EMS_METRIC.match(name)
        if match:
            offline = bool(match["offline"])
            if method is not None and offline != (method == "offline"):
                continue
            triple = ems.get(match["scorer"])
            if isinstance(triple, (list, tuple)) and len(triple) == 3:
                value = as_float(triple[EMS_PARTS.index(match["part"])])
                values[name] = math.nan if value is None else value
            elif match["scorer"] in ems:  # the scorer could not run for this run
                values[name] = math.nan
        elif name == "bertscore_f1" and "bertscore_f1" in document:
            value = as_float(document["bertscore_f1"])
            values[name] = math.nan if value is None else value
    return values


def _ems_attach(task_run: TaskRun, run: Run) -> None:
    if not task_run.samples:
        return
    names = list(task_run.metrics)
    details, how = find_ems_details(task_run, run)
    if details is None:
        task_run.notes.append(f"EMS details: {how}")
    else:
        by_id = {str(d.get("id")): d for d in details.get("documents") or [] if isinstance(d, dict)}
        for sample in task_run.samples:
            document = by_id.get(str(sample.doc.get("id")))
            if document is not None:
                sample.details["ems"] = document
                sample.values.update(ems_values(document, names, details.get("method")))
        task_run.provenance["EMS details"] = how
        task_run.provenance["EMS method"] = details.get("method")
        task_run.provenance["EMS judge"] = details.get("judge") or "none (offline extractor and matcher)"
        if details.get("prompts_hash"):
            task_run.provenance["EMS judge prompts hash"] = details["prompts_hash"]
        if details.get("match_threshold") is not None:
            task_run.provenance["EMS match threshold"] = details["match_threshold"]
        task_run.provenance["BERTScore model"] = details.get("bertscore_model")
    for sample in task_run.samples:  # `lm-eval-fin score`: its EMS documents, judged
        judged = sample.details.get("judge")
        if judged:
            sample.details["ems"] = judged
            sample.values.update(ems_values(judged, names, "llm"))
    _scoring_provenance(task_run)


def _scoring_provenance(task_run: TaskRun) -> None:
    """The scoring settings the task recorded in its documents (judge spec and options)."""
    scoring = task_run.samples[0].doc.get("scoring") if task_run.samples else None
    try:
        settings = json.loads(scoring) if isinstance(scoring, str) else scoring
    except ValueError:
        settings = None
    if isinstance(settings, dict):
        task_run.provenance["scoring settings"] = json.dumps(settings, sort_keys=True)


def _ems_question(sample: Sample) -> list[Block]:
    doc = sample.doc
    return [
        facts_block("", [("company", doc.get("company")), ("ticker", doc.get("ticker")),
                         ("call date", doc.get("call_date")), ("question id", doc.get("question_id"))]),
        text_block("Question", str(doc.get("question", ""))),
        text_block("Reference answer", str(doc.get("reference", ""))),
    ]


def _ems_answer(sample: Sample, context: dict) -> list[Block]:
    blocks = []
    document = sample.details.get("ems")
    if not document:
        blocks.append(text_block("EMS", "No EMS details for this answer (see the task's notes).", NOTE))
    else:
        refs = [str(p) for p in document.get("reference_points") or []]
        answer_points = [str(p) for p in document.get("answer_points") or []]
        alignment = list(document.get("alignment") or [])
        scores = document.get("scores") if isinstance(document.get("scores"), dict) else {}
        scorers = list(scores)
        ems = document.get("ems") if isinstance(document.get("ems"), dict) else {}
        blocks.append(table_block(
            "EMS per scorer", ["scorer", "precision", "recall", "F1"],
            [[s, *(_show(v) for v in (ems.get(s) or [None] * 3))] for s in ems],
        ))
        rows = []
        for i, ref in enumerate(refs):
            j = alignment[i] if i < len(alignment) else -1
            matched = isinstance(j, int) and 0 <= j < len(answer_points)
            row = [Cell(str(i + 1)), Cell(ref), Cell(f"A{j + 1}: {answer_points[j]}" if matched else "no match",
                                                    HIT if matched else MISS)]
            for scorer in scorers:
                per_point = scores.get(scorer)
                value = per_point[i] if isinstance(per_point, list) and i < len(per_point) else None
                row.append(Cell(_show(value)))
            rows.append(row)
        blocks.append(table_block(
            f"Reference points ({len(refs)}) and the answer point each was matched to",
            ["#", "reference point", "matched answer point", *(f"s ({s})" for s in scorers)], rows,
        ))
        used = {j for j in alignment if isinstance(j, int) and j >= 0}
        blocks.append(table_block(
            f"Answer points ({len(answer_points)})", ["#", "answer point", "matched"],
            [[Cell(f"A{j + 1}"), Cell(p), Cell("yes", HIT) if j in used else Cell("unmatched", MISS)]
             for j, p in enumerate(answer_points)],
        ))
        failures = document.get("parse_failures")
        if isinstance(failures, dict) and any(failures.values()):
            blocks.append(facts_block("Judge parse failures", sorted(failures.items())))
    blocks.append(text_block("Answer", sample.answer or "(empty)"))
    return blocks


EMS = View("fin_ems", _ems_attach, _ems_question, _ems_answer, headline=(r"ems_(llm_)?f1", r"ems_.*_f1"))


# --------------------------------------------------------------------------------- fin_lfqa

# results metric -> field of the judge details `lm-eval-fin score` writes per sample
LFQA_JUDGE_FIELDS = {
    "judge_score": "judge_score",
    "judge_accuracy": "accuracy",
    "judge_numerical": "numerical_correctness",
    "judge_entailment": "evidence_entailment",
}
_REPORT_HEADER = re.compile(r"^=== (?P<company>.+?): .*===\s*$")
_INDEXED_LINE = re.compile(r"^\[(?P<index>-?\d+)\]\s?(?P<text>.*)$")


def indexed_entries(text: str) -> dict[tuple[str, int], str]:
    """``(company, index) -> paragraph`` of FinLFQA's rendered reports ("=== CWT: ... ==="
    headers, "[i] text" paragraphs, continuation lines joined), company "" for the knowledge
    list, which has no header."""
    entries: dict[tuple[str, int], str] = {}
    company, last = "", None
    for line in str(text or "").splitlines():
        header = _REPORT_HEADER.match(line)
        if header:
            company, last = header["company"].strip().upper(), None
            continue
        indexed = _INDEXED_LINE.match(line)
        if indexed:
            last = (company, int(indexed["index"]))
            entries[last] = indexed["text"]
        elif last is not None:
            entries[last] += "\n" + line
    return entries


def _lfqa_attach(task_run: TaskRun, run: Run) -> None:
    for sample in task_run.samples:
        judged = sample.details.get("judge")
        if not judged:
            continue
        for metric, key in LFQA_JUDGE_FIELDS.items():
            if metric in task_run.metrics:
                value = as_float(judged.get(key))
                sample.values[metric] = math.nan if value is None else value  # unscored: left out
        if "judge_failure" in task_run.metrics:
            sample.values["judge_failure"] = float(bool(judged.get("judge_failure")))
        if "judge_parse_failure" in task_run.metrics:
            sample.values["judge_parse_failure"] = float(bool(judged.get("parse_failure")) and not judged.get("judge_failure"))
    _scoring_provenance(task_run)
    judge = (run.results.get("judge") or {}) if run.judged else {}
    if judge.get("spec"):
        task_run.provenance["judge (lm-eval-fin score)"] = judge["spec"]


def _reference_clauses(doc: dict) -> list[dict]:
    try:
        clauses = json.loads(doc.get("reference_clauses") or "[]")
    except ValueError:
        return []
    return [c for c in clauses if isinstance(c, dict)] if isinstance(clauses, list) else []


def _lfqa_question(sample: Sample) -> list[Block]:
    doc = sample.doc
    clauses = _reference_clauses(doc)
    blocks = [text_block("Question", str(doc.get("question", "")))]
    if clauses:
        blocks.append(table_block(
            "Reference clauses", ["#", "clause", "evidence", "code", "knowledge"],
            [[str(n), str(c.get("text", "")),
              ", ".join(f"{e[0]} [{e[1]}]" for e in c.get("evidence") or [] if isinstance(e, list) and len(e) == 2),
              "\n\n".join(str(s) for s in c.get("code") or []) or "none",
              ", ".join(str(k) for k in c.get("knowledge") or []) or "none"]
             for n, c in enumerate(clauses, start=1)],
        ))
    blocks.append(text_block("Report excerpts", str(doc.get("reports", ""))))
    blocks.append(text_block("Professional knowledge", str(doc.get("knowledge", ""))))
    return blocks


def _lfqa_prepare(samples: list[Sample], options: ViewOptions) -> dict:
    """With ``execute_code``: every distinct snippet of the answers, run once in the sandbox."""
    if not options.execute_code:
        return {"outcomes": None}
    from lm_eval_fin import attribution, sandbox

    snippets = list(dict.fromkeys(
        code for s in samples for code in attribution.parse_answer(s.answer, s.doc.get("companies") or []).code
    ))
    try:
        results = sandbox.run_codes(snippets) if snippets else []
    except sandbox.SandboxError as exc:
        return {"outcomes": None, "error": f"the sandbox cannot start here: {exc}"}
    return {"outcomes": dict(zip(snippets, results))}


def _outcome(code: str, context: dict) -> Cell:
    outcomes = context.get("outcomes")
    if outcomes is None:
        return Cell(context.get("error") or "not run (pass --execute_code to run it in the sandbox)", NOTE)
    result = outcomes.get(code)
    if result is None:
        return Cell("not run", NOTE)
    if result.ok:
        return Cell(f"returned {result.value}", HIT)
    return Cell(f"failed: {result.error}", MISS)


def _lfqa_answer(sample: Sample, context: dict) -> list[Block]:
    from lm_eval_fin import attribution, numbers

    doc = sample.doc
    parsed = attribution.parse_answer(sample.answer, doc.get("companies") or [])
    reference = _reference_clauses(doc)
    gold_evidence = {(str(e[0]).upper(), int(e[1])) for c in reference for e in c.get("evidence") or []
                     if isinstance(e, list) and len(e) == 2 and isinstance(e[1], int)}
    gold_knowledge = {int(k) for c in reference for k in c.get("knowledge") or [] if isinstance(k, int)}
    paragraphs = indexed_entries(doc.get("reports", ""))
    knowledge = indexed_entries(doc.get("knowledge", ""))
    blocks = []
    if parsed.parse_failure:
        blocks.append(text_block("Clauses", "No attributed clause could be read from this answer (a parse failure).", MISS))
    rows = []
    for number, clause in enumerate(parsed.clauses, start=1):
        rows.append([Cell(str(number)), Cell(clause.text)])
        for company, index in clause.evidence:
            key = (str(company).upper(), int(index))
            rows.append([Cell(""), Cell(f"evidence {company} [{index}]: {paragraphs.get(key, '(no such paragraph)')}",
                                        HIT if key in gold_evidence else MISS)])
        for code in clause.code:
            rows.append([Cell(""), Cell(f"code:\n{code}", "code")])
            rows.append([Cell(""), _outcome(code, context)])
        for index in clause.knowledge:
            rows.append([Cell(""), Cell(f"knowledge [{index}]: {knowledge.get(('', index), '(no such entry)')}",
                                        HIT if index in gold_knowledge else MISS)])
    if rows:
        blocks.append(table_block(
            "Clauses with their evidence, code and knowledge (green: also in the reference)", ["#", "clause"], rows,
        ))
    reference_text = "\n".join(str(c.get("text", "")) for c in reference)
    predicted, expected = numbers.extract_numbers(parsed.text), numbers.extract_numbers(reference_text)
    predicted, expected = list(dict.fromkeys(predicted)), list(dict.fromkeys(expected))
    number_rows = [[Cell(f"{v:g}"), Cell("answer"), Cell("matched", HIT) if hit else Cell("not in the reference", MISS)]
                   for v, hit in zip(predicted, numbers.matched(predicted, expected))]
    number_rows += [[Cell(f"{v:g}"), Cell("reference"), Cell("recalled", HIT) if hit else Cell("missed", MISS)]
                    for v, hit in zip(expected, numbers.matched(expected, predicted))]
    if number_rows:
        blocks.append(table_block("Numbers (matched within 1%, up to scale)", ["value", "in", "outcome"], number_rows))
    judged = sample.details.get("judge")
    if judged:
        blocks.append(facts_block("Judge", [(k, judged.get(k)) for k in
                                            ("accuracy", "numerical_correctness", "evidence_entailment", "judge_score",
                                             "judge_failure", "parse_failure", "judge_error")]))
        if judged.get("judge_reply"):
            blocks.append(text_block("Judge reply", str(judged["judge_reply"])))
    blocks.append(text_block("Answer", sample.answer or "(empty)"))
    return blocks


LFQA = View("fin_lfqa", _lfqa_attach, _lfqa_question, _lfqa_answer, _lfqa_prepare, headline=("numeric_f1",))


# --------------------------------------------------------------------------- fin_agentbench


def _json_field(doc: dict, name: str) -> dict:
    try:
        value = json.loads(doc.get(name) or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _agentbench_question(sample: Sample) -> list[Block]:
    return [text_block("Question", question_title(sample.doc, limit=1000)),
            text_block("Prompt", str(sample.doc.get("prompt", "")))]


def _agentbench_answer(sample: Sample, context: dict) -> list[Block]:
    from lm_eval_fin.ranking import parse_ranking

    doc = sample.doc
    candidates = [c for c in doc.get("candidates") or [] if isinstance(c, int)]
    labels = {int(k): str(v) for k, v in _json_field(doc, "labels").items() if str(k).lstrip("-").isdigit()}
    grades = {int(k): v for k, v in _json_field(doc, "qrel").items() if str(k).lstrip("-").isdigit()}
    ranking = parse_ranking(sample.answer, candidates, labels=labels or None)
    ideal = sorted(candidates, key=lambda c: -(as_float(grades.get(c)) or 0.0))
    blocks = [facts_block("", [
        ("ranking read", "none: a parse failure (scores 0)" if ranking is None else ", ".join(map(str, ranking))),
        ("graded order", ", ".join(f"{c} (grade {grades.get(c, 0)})" for c in ideal)),
    ])]
    order = list(ranking or []) + [c for c in candidates if c not in (ranking or [])]
    rows = []
    for c in order:
        grade = as_float(grades.get(c)) or 0.0
        ranked = ranking is not None and c in ranking
        rows.append([
            Cell(str(ranking.index(c) + 1) if ranked else "not ranked", "" if ranked else NOTE),
            Cell(f"{c}: {labels[c]}" if c in labels else f"Index {c}"),
            Cell(_show(grades.get(c, 0)), HIT if grade >= 1 else ""),
            Cell(str(ideal.index(c) + 1)),
        ])
    blocks.append(table_block("The model's ranking against the graded candidates (green: relevant)",
                              ["model rank", "candidate", "grade", "graded rank"], rows))
    blocks.append(text_block("Answer", sample.answer or "(empty)"))
    return blocks


AGENTBENCH = View("fin_agentbench", _generic_attach, _agentbench_question, _agentbench_answer, headline=(r"ndcg@\d+",))

VIEWS = {view.name: view for view in (EMS, LFQA, AGENTBENCH)}


def view_for(task: str) -> View:
    """The view of a task: its own name or its longest ``<prefix>_`` in :data:`VIEWS`."""
    if task in VIEWS:
        return VIEWS[task]
    prefixes = [name for name in VIEWS if task.startswith(name + "_")]
    return VIEWS[max(prefixes, key=len)] if prefixes else GENERIC
