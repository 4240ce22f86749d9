"""FinLFQA (Long et al., EMNLP Findings 2025): documents, prompt and scoring.

Four parts, each usable without the harness:

* the hub schema -> our documents (:func:`to_document`, the one place that knows the hub's
  field names) and the rendering of reports and knowledge lists;
* the end-to-end prompt (:func:`build_prompt`);
* per-document scores (:func:`score_document`, pure): numeric P/R/F1, evidence P/R/F1,
  knowledge recall, ROUGE-L, answer parse failure;
* corpus-level scores computed once per run from :class:`CorpusItem` s: code execution rate
  (every snippet through :func:`lm_eval_fin.sandbox.run_codes`), BERTScore F1, and the LLM
  judge (one batched pass over all documents; :func:`rescore` does the same for samples
  logged by ``lm_eval --log_samples``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from lm_eval_fin import attribution, numbers, textsim

logger = logging.getLogger(__name__)

HUB_DATASET = "Dragongon/FinLFQA"
SPLITS = ("validation", "test")
DEFAULT_BERTSCORE_MODEL = textsim.DEFAULT_BERTSCORE_MODEL
# The hub's JSON lists carry no explicit indices; the annotators' indices are taken to be list
# positions from 0. Users can switch with --metadata '{"index_base": 1}'.
DEFAULT_INDEX_BASE = 0
CODE_TIMEOUT_S = 5.0

# Where the hub may keep the professional-knowledge list (its name is not documented).
KNOWLEDGE_LIST_FIELDS = (
    "knowledge", "knowledge_list", "professional_knowledge", "knowledges", "knowledge_base",
    "financial_knowledge", "formulas", "knowledge_pool",
)
ID_FIELDS = ("id", "qid", "uid", "example_id", "question_id")
CLAUSE_TEXT_FIELDS = ("clause", "text", "content", "sentence", "statement", "answer")
CLAUSE_EVIDENCE_FIELDS = ("evidence", "evidences", "citations")
CLAUSE_CODE_FIELDS = ("code", "codes", "python", "program")
CLAUSE_KNOWLEDGE_FIELDS = ("knowledge", "knowledges", "professional_knowledge", "knowledge_indices")


class SchemaError(ValueError):
    """A record that is not in the FinLFQA hub schema; the message lists what was found."""


# ---------------------------------------------------------------------------------- rendering


def render_table(rows: Sequence[Sequence[Any]]) -> str:
    """A table as the paper serialises it: `` | `` between columns, a newline between rows."""
    return "\n".join(" | ".join("" if cell is None else str(cell).strip() for cell in row) for row in rows)


def _is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, list) for row in value)


def render_paragraph(item: Any) -> str:
    """A paragraph of a report: text as it is, a table (rows of cells, possibly a JSON
    string, or a dict with a ``table`` entry) serialised with ``|``."""
    if isinstance(item, str):
        stripped = item.strip()
        if stripped.startswith("[["):
            try:
                decoded = json.loads(stripped)
            except ValueError:
                return stripped
            return render_table(decoded) if _is_table(decoded) else stripped
        return stripped
    if _is_table(item):
        return render_table(item)
    if isinstance(item, dict):
        parts = []
        for key in ("title", "caption", "text", "content", "paragraph"):
            if isinstance(item.get(key), str):
                parts.append(item[key].strip())
        if "table" in item:
            parts.append(render_paragraph(item["table"]))
        if parts:
            return "\n".join(p for p in parts if p)
    return json.dumps(item, ensure_ascii=False)


def indexed_paragraphs(report: Any, index_base: int) -> list[tuple[int, str]]:
    """(index, text) for each paragraph of one company's report, with the indices the
    evidence refers to: a dict's own keys, else list positions counted from ``index_base``."""
    if isinstance(report, str):
        try:
            report = json.loads(report)
        except ValueError:
            return [(index_base, report.strip())]
    if isinstance(report, dict):
        for key in ("paragraphs", "context", "content", "text"):
            if key in report and not all(str(k).strip().isdigit() for k in report):
                return indexed_paragraphs(report[key], index_base)
        if all(str(k).strip().isdigit() for k in report):
            return sorted((int(k), render_paragraph(v)) for k, v in report.items())
        return [(index_base, render_paragraph(report))]
    if isinstance(report, list):
        return [(index_base + i, render_paragraph(item)) for i, item in enumerate(report)]
    return [(index_base, render_paragraph(report))]


def render_reports(context: dict[str, Any], index_base: int) -> str:
    blocks = []
    for company, report in context.items():
        lines = [f"[{index}] {text}" for index, text in indexed_paragraphs(report, index_base)]
        blocks.append(f"=== {company}: 10-Q report excerpt ===\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def render_knowledge(entries: Sequence[Any], index_base: int) -> str:
    return "\n".join(
        f"[{index_base + i}] {render_paragraph(entry)}" for i, entry in enumerate(entries)
    )


def render_answer(clauses: Sequence[dict]) -> str:
    """Reference clauses (as stored in a document) in the answer format the prompt asks for."""
    lines = []
    for number, clause in enumerate(clauses, start=1):
        by_company: dict[str, list[int]] = {}
        for company, index in clause["evidence"]:
            by_company.setdefault(company, []).append(index)
        evidence = "; ".join(f"{c} {sorted(set(i))}" for c, i in by_company.items()) or "none"
        lines.append(f"{number}. {clause['text']}")
        lines.append(f"Evidence: {evidence}")
        if clause["code"]:
            lines.append("Code:")
            for snippet in clause["code"]:
                lines.append(f"```python\n{snippet.strip()}\n```")
        else:
            lines.append("Code: none")
        lines.append(f"Knowledge: {sorted(set(clause['knowledge']))}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ hub schema


def _field(record: dict, names: Sequence[str]) -> tuple[str | None, Any]:
    lowered = {str(k).lower(): k for k in record}
    for name in names:
        if name in lowered:
            return lowered[name], record[lowered[name]]
    return None, None


def _decoded(value: Any) -> Any:
    """The hub keeps nested values as JSON strings; local copies may hold them decoded."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        return json.loads(value)
    return value


def to_document(record: dict, position: int = 0, index_base: int = DEFAULT_INDEX_BASE) -> dict:
    """One hub record -> one task document (the only function that knows the hub's names).

    Hub schema: ``question`` (text), ``context`` (JSON: ticker -> report paragraphs),
    ``clauses`` (JSON: the reference answer's clauses, each with its text, evidence per
    ticker, code and knowledge; empty where the split has no public answers) and the
    professional-knowledge list under one of :data:`KNOWLEDGE_LIST_FIELDS`.
    Raises :class:`SchemaError` naming the missing part and the fields found.
    """
    if not isinstance(record, dict):
        raise SchemaError(f"record {position}: expected a JSON object, got {type(record).__name__}")
    found = sorted(map(str, record))

    def missing(what: str) -> SchemaError:
        return SchemaError(
            f"FinLFQA record {position}: no {what}; fields found: {found}. Expected the hub "
            f"schema of {HUB_DATASET}: question, context, clauses and the knowledge list "
            f"(one of {list(KNOWLEDGE_LIST_FIELDS)})."
        )

    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise missing("'question' text")
    try:
        context = _decoded(record.get("context"))
        clauses = _decoded(record.get("clauses"))
        knowledge_name, knowledge = _field(record, KNOWLEDGE_LIST_FIELDS)
        knowledge = _decoded(knowledge)
    except ValueError as exc:
        raise SchemaError(f"FinLFQA record {position}: a JSON field does not decode ({exc})") from exc
    if not isinstance(context, dict) or not context:
        raise missing("'context' (a JSON object keyed by the two companies' tickers)")
    if knowledge_name is None:
        raise missing("professional-knowledge list")
    if isinstance(knowledge, str):
        knowledge = [line for line in knowledge.split("\n") if line.strip()]
    if not isinstance(knowledge, list):
        raise SchemaError(
            f"FinLFQA record {position}: field {knowledge_name!r} should be a list of knowledge "
            f"entries, got {type(knowledge).__name__}; fields found: {found}"
        )
    companies = [str(c) for c in context]
    reference = [] if clauses in (None, "", []) else _reference_clauses(clauses, companies, position)
    _warn_if_out_of_range(reference, context, knowledge, index_base, position)
    _, identifier = _field(record, ID_FIELDS)
    return {
        "id": str(identifier) if identifier is not None else f"finlfqa-{position}",
        "question": question.strip(),
        "companies": companies,
        "reports": render_reports(context, index_base),
        "knowledge": render_knowledge(knowledge, index_base),
        # JSON text: the clauses' shapes vary too much for an Arrow column.
        "reference_clauses": json.dumps(reference, ensure_ascii=False),
        "has_reference": bool(reference),
    }


def _reference_clauses(clauses: Any, companies: list[str], position: int) -> list[dict]:
    if isinstance(clauses, dict):
        _, clauses = _field(clauses, ("clauses", "answer"))
    if not isinstance(clauses, list):
        raise SchemaError(f"FinLFQA record {position}: 'clauses' should decode to a list of clauses")
    reference = []
    for number, clause in enumerate(clauses):
        if not isinstance(clause, dict):
            raise SchemaError(f"FinLFQA record {position}, clause {number}: expected an object, got {clause!r:.80}")
        text_name, text = _field(clause, CLAUSE_TEXT_FIELDS)
        evidence_name, evidence = _field(clause, CLAUSE_EVIDENCE_FIELDS)
        if text_name is None or not isinstance(text, str) or evidence_name is None:
            raise SchemaError(
                f"FinLFQA record {position}, clause {number}: needs its text (one of "
                f"{list(CLAUSE_TEXT_FIELDS)}) and evidence (one of {list(CLAUSE_EVIDENCE_FIELDS)}); "
                f"fields found: {sorted(map(str, clause))}"
            )
        reference.append({
            "text": text.strip(),
            "evidence": [list(pair) for pair in attribution.evidence_from_json(_decoded(evidence), companies)],
            "code": list(attribution.code_from_json(_field(clause, CLAUSE_CODE_FIELDS)[1])),
            "knowledge": list(attribution.knowledge_from_json(_field(clause, CLAUSE_KNOWLEDGE_FIELDS)[1])),
        })
    return reference


def _warn_if_out_of_range(reference, context, knowledge, index_base, position) -> None:
    """An index past the end of a list is the sign of 1-based data read as 0-based."""
    sizes = {company: len(indexed_paragraphs(report, index_base)) for company, report in context.items()}
    for clause in reference:
        for company, index in clause["evidence"]:
            if company in sizes and not index_base <= index < index_base + sizes[company]:
                logger.warning(
                    "FinLFQA record %d cites %s paragraph %d, outside %d..%d: check "
                    "--metadata index_base (now %d)", position, company, index, index_base,
                    index_base + sizes[company] - 1, index_base,
                )
                return
        for index in clause["knowledge"]:
            if not index_base <= index < index_base + len(knowledge):
                logger.warning(
                    "FinLFQA record %d cites knowledge %d, outside %d..%d: check --metadata "
                    "index_base (now %d)", position, index, index_base,
                    index_base + len(knowledge) - 1, index_base,
                )
                return


def read_records(data_path: str | Path, split: str | None = None) -> list[dict]:
    """Records of a local copy in the hub schema: JSON (a list, or an object with one list
    per split, of which ``split``'s is read), JSON Lines, or parquet (one split per file)."""
    path = Path(data_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"FinLFQA data_path {str(path)!r} is not a file (JSON, JSONL or parquet)")
    if path.suffix == ".parquet":
        import pyarrow.parquet

        return pyarrow.parquet.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, dict):
        splits = [key for key in SPLITS if isinstance(data.get(key), list)]
        if splits:
            wanted = split or "validation"
            if wanted not in splits:
                raise SchemaError(
                    f"{path}: holds the split(s) {splits} but not {wanted!r}; give a file with a "
                    f"{wanted!r} list (or one list of records) as data_path"
                )
            return data[wanted]
        for key in ("data", "examples"):
            if isinstance(data.get(key), list):
                return data[key]
        raise SchemaError(f"{path}: a JSON object without a list of records (keys: {sorted(data)})")
    if not isinstance(data, list):
        raise SchemaError(f"{path}: expected a JSON list of records")
    return data


def load_hub_records(split: str) -> Iterable[dict]:
    import datasets

    try:
        return datasets.load_dataset(HUB_DATASET, split=split)
    except Exception as exc:  # noqa: BLE001 - offline, unknown split: say what to do instead
        raise RuntimeError(
            f"could not load {HUB_DATASET} split {split!r} ({type(exc).__name__}: {exc}). "
            "Offline? Pass a local copy with --metadata '{\"data_path\": \"<json/jsonl/parquet>\"}'."
        ) from exc


def scoring_settings(metadata: dict[str, Any]) -> dict[str, Any]:
    """The scoring settings of a run (they travel in every document to the aggregation),
    checked at dataset load so that a bad judge setting stops the run before generation,
    not after it: the judge spec (``judge`` in the metadata, else ``$LM_EVAL_FIN_JUDGE``),
    the judge options (``judge_<option>`` keys or a ``judge_options`` object, and
    ``$LM_EVAL_FIN_JUDGE_OPTIONS``) and the BERTScore model. Raises ValueError (a
    :class:`~lm_eval_fin.judge.JudgeSpecError` for a bad spec)."""
    from lm_eval_fin.judge import JudgeSpecError, parse_spec
    from lm_eval_fin.judge.options import JUDGE_ENV, options_from_env, options_from_metadata

    spec = metadata.get("judge") or None
    if spec:
        parse_spec(str(spec))
    elif os.environ.get(JUDGE_ENV, "").strip():
        try:
            parse_spec(os.environ[JUDGE_ENV])
        except JudgeSpecError as exc:
            raise JudgeSpecError(f"${JUDGE_ENV}: {exc}") from exc
    options = options_from_metadata(metadata, "fin_lfqa")
    options_from_env()  # read again at aggregation; checked here
    max_tokens = options.get("max_tokens")
    return {
        "bertscore_model": metadata.get("bertscore_model") or DEFAULT_BERTSCORE_MODEL,
        "judge": spec,
        "judge_max_tokens": max_tokens,
        "judge_options": options,
    }


def load_documents(
    split: str = "validation",
    data_path: str | None = None,
    index_base: int = DEFAULT_INDEX_BASE,
    scoring: dict | None = None,
) -> list[dict]:
    """Task documents from the hub split, or from a local copy when ``data_path`` is given.
    ``scoring`` (BERTScore model, judge spec) travels in each document to the aggregation."""
    if split not in SPLITS:
        raise ValueError(f"FinLFQA split must be one of {SPLITS}, got {split!r}")
    if int(index_base) not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {index_base!r}")
    records = read_records(data_path, split) if data_path else load_hub_records(split)
    scoring_json = json.dumps(scoring or {}, sort_keys=True)
    documents = []
    for position, record in enumerate(records):
        document = to_document(dict(record), position, int(index_base))
        document["scoring"] = scoring_json
        documents.append(document)
    return documents


# ------------------------------------------------------------------------------------ prompt

_FORMAT_EXAMPLE = """1. ABC's gross margin rose to 41.0% while XYZ's fell to 35.2%.
Evidence: ABC [4]; XYZ [7, 8]
Code:
```python
def abc_gross_margin():
    revenue, cost = 1200.0, 708.0
    return round((revenue - cost) / revenue * 100, 1)
```
Knowledge: [2]
2. ABC therefore prices its products more effectively than XYZ.
Evidence: inferred from clause 1
Code: none
Knowledge: []"""


def build_prompt(doc: dict) -> str:
    """The end-to-end prompt: reports, knowledge list and question in; answer and
    attributions out in one pass (the paper's end-to-end setting, in our own words)."""
    companies = " and ".join(doc["companies"])
    return (
        f"You are a financial analyst. Answer the question about {companies} using the excerpts "
        "of their quarterly (10-Q) reports and the list of professional knowledge below.\n\n"
        f"{doc['reports']}\n\n=== Professional knowledge ===\n{doc['knowledge']}\n\n"
        f"Question: {doc['question']}\n\n"
        "Write the answer as numbered clauses, one claim per clause. Under each clause write:\n"
        "Evidence: the paragraphs that support the clause, as TICKER [paragraph numbers] for each "
        "company, or \"inferred from clause N\" when it follows from earlier clauses.\n"
        "Code: for a number you calculated, a Python function that takes no arguments and returns "
        "that number, in a ```python block; otherwise \"none\".\n"
        "Knowledge: the numbers of the knowledge entries the clause uses, e.g. [3], or [] if none.\n\n"
        f"Format example (made-up companies ABC and XYZ):\n{_FORMAT_EXAMPLE}\n\nAnswer:\n"
    )


def reference_clauses(doc: dict) -> list[dict]:
    return json.loads(doc["reference_clauses"]) if doc.get("reference_clauses") else []


def reference_text(doc: dict) -> str:
    return "\n".join(clause["text"] for clause in reference_clauses(doc))


# ----------------------------------------------------------------------- per-document scores

PER_DOCUMENT_METRICS = (
    "numeric_precision", "numeric_recall", "numeric_f1",
    "evidence_precision", "evidence_recall", "evidence_f1",
    "knowledge_recall", "rouge_l", "code_per_answer", "parse_failure",
)
CORPUS_METRICS = (
    "code_exec_rate", "bertscore_f1",
    "judge_score", "judge_accuracy", "judge_numerical", "judge_entailment",
    "judge_parse_failure", "judge_failure", "judge_skipped",
)


@dataclass(frozen=True, repr=False)
class CorpusItem:
    """What the corpus-level metrics need from one document. lm-eval hands the same list of
    these to each corpus metric's aggregation; :func:`_memoised` makes the work run once.

    lm-eval writes every per-document metric value into ``--log_samples``; ``__str__`` keeps
    that entry to one line instead of repeating the reports for every metric.
    """

    doc_id: str
    answer: str  # the model's raw answer (the judge reads its attributions)
    answer_text: str  # its clause texts (BERTScore)
    reference_text: str
    reference_answer: str  # the reference in the answer format (the judge)
    code: tuple[str, ...]
    question: str
    reports: str
    knowledge: str
    scoring: str  # JSON: {"bertscore_model": ..., "judge": ..., "judge_max_tokens": ...}

    @property
    def key(self) -> str:
        digest = hashlib.sha1(f"{self.answer}\x00{self.scoring}".encode("utf-8", "replace")).hexdigest()
        return f"{self.doc_id}:{digest[:16]}"

    def __str__(self) -> str:
        return f"corpus-level (doc {self.doc_id}, {len(self.code)} code snippets)"

    __repr__ = __str__


def _require_reference(doc: dict) -> None:
    if not doc.get("has_reference"):
        raise ValueError(
            f"FinLFQA document {doc.get('id')} has no reference answer (the hub's test split keeps "
            "its answers private): run fin_lfqa_test with --predict_only --log_samples, or score "
            "the validation split (fin_lfqa)."
        )


def corpus_item(doc: dict, answer: str, parsed: attribution.ParsedAnswer | None = None) -> CorpusItem:
    _require_reference(doc)
    parsed = parsed or attribution.parse_answer(answer, doc["companies"])
    clauses = reference_clauses(doc)
    return CorpusItem(
        doc_id=str(doc.get("id")),
        answer=answer,
        answer_text=parsed.text,
        reference_text="\n".join(clause["text"] for clause in clauses),
        reference_answer=render_answer(clauses),
        code=parsed.code,
        question=doc["question"],
        reports=doc["reports"],
        knowledge=doc["knowledge"],
        scoring=doc.get("scoring") or "{}",
    )


def score_document(doc: dict, answer: str | None) -> dict[str, Any]:
    """Every per-document metric, plus the :class:`CorpusItem` under each corpus metric."""
    _require_reference(doc)
    answer = answer if isinstance(answer, str) else ""
    parsed = attribution.parse_answer(answer, doc["companies"])
    item = corpus_item(doc, answer, parsed)
    clauses = reference_clauses(doc)
    gold_evidence = [tuple(pair) for clause in clauses for pair in clause["evidence"]]
    gold_knowledge = [index for clause in clauses for index in clause["knowledge"]]
    numeric = numbers.numeric_prf(parsed.text, item.reference_text)
    evidence = attribution.evidence_prf(parsed.evidence, gold_evidence)
    rouge = textsim.rouge_l([parsed.text], [item.reference_text])[0]
    scores: dict[str, Any] = {
        "numeric_precision": numeric[0],
        "numeric_recall": numeric[1],
        "numeric_f1": numeric[2],
        "evidence_precision": evidence[0],
        "evidence_recall": evidence[1],
        "evidence_f1": evidence[2],
        "knowledge_recall": attribution.knowledge_recall(parsed.knowledge, gold_knowledge),
        "rouge_l": rouge[2],
        "code_per_answer": float(len(parsed.code)),
        "parse_failure": float(parsed.parse_failure),
    }
    scores.update({name: item for name in CORPUS_METRICS})
    return scores


# ------------------------------------------------------------------------- corpus metrics

_MEMO: dict[tuple, Any] = {}
_MEMO_SIZE = 16


def _memoised(kind: str, items: Sequence[CorpusItem], compute: Callable[[Sequence[CorpusItem]], Any]) -> Any:
    """``compute(items)`` once per (kind, run): lm-eval calls every corpus metric's
    aggregation separately, each time with the same documents' items."""
    key = (kind, tuple(item.key for item in items))
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = compute(items)
    return _MEMO[key]


def _scoring(items: Sequence[CorpusItem]) -> dict:
    return json.loads(items[0].scoring) if items else {}


def code_exec_rate(items: Sequence[CorpusItem]) -> float:
    """Share of all snippets of the run that define a function which, called with no
    arguments in the sandbox, returns a value other than None in time (micro average).
    0.0 when the run produced no snippet (the sandbox's convention: no code, no credit;
    ``code_per_answer`` shows the count beside it). NaN, with a warning, when the sandbox
    cannot be set up here (:class:`lm_eval_fin.sandbox.SandboxError`)."""
    return _memoised("code", items, _code_exec_rate)


def _code_exec_rate(items: Sequence[CorpusItem]) -> float:
    from lm_eval_fin import sandbox

    snippets = [snippet for item in items for snippet in item.code]
    try:
        results = sandbox.run_codes(snippets, timeout=CODE_TIMEOUT_S) if snippets else []
    except sandbox.SandboxError as exc:  # after generation: report, never discard the run
        logger.warning(
            "FinLFQA: the code sandbox cannot be set up, so code_exec_rate is NaN (%d snippets not "
            "run): %s", len(snippets), exc,
        )
        return math.nan
    rate = sandbox.code_exec_rate(results)
    logger.info("FinLFQA code execution: %d of %d snippets ran", sum(r.ok for r in results), len(results))
    return rate


def bertscore_f1(items: Sequence[CorpusItem]) -> float:
    """Mean BERTScore F1 of the answers' clause texts against the references, with the model
    named by the task metadata ``bertscore_model``; NaN (with a warning) when it cannot load."""
    return _memoised("bertscore", items, _bertscore_f1)


def _bertscore_f1(items: Sequence[CorpusItem]) -> float:
    if not items:
        return math.nan
    model = _scoring(items).get("bertscore_model") or DEFAULT_BERTSCORE_MODEL
    scores = textsim.bertscore_f1(
        [item.answer_text for item in items], [item.reference_text for item in items], model=model
    )
    if scores is None:
        return math.nan
    logger.info("FinLFQA BERTScore computed with model %s", model)
    return sum(scores) / len(scores)


# ---------------------------------------------------------------------------------- the judge

JUDGE_CRITERIA = ("accuracy", "numerical_correctness", "evidence_entailment")
JUDGE_MAX_TOKENS = 128
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "integer", "minimum": 1, "maximum": 5} for name in JUDGE_CRITERIA},
    "required": list(JUDGE_CRITERIA),
    "additionalProperties": False,
}

_JUDGE_SYSTEM = (
    "You grade answers to financial analysis questions against a reference answer written by "
    "an expert. You reply with JSON only."
)


@dataclass(frozen=True)
class JudgeVerdict:
    accuracy: int
    numerical_correctness: int
    evidence_entailment: int

    @property
    def total(self) -> int:
        return self.accuracy + self.numerical_correctness + self.evidence_entailment


def judge_prompt(item: CorpusItem) -> str:
    return (
        "Read the report excerpts, the question, the expert's reference answer and a candidate "
        "answer. Each answer is in numbered clauses with the report paragraphs it cites "
        "(Evidence), Python code for computed numbers and the knowledge entries it uses.\n\n"
        f"{item.reports}\n\n=== Professional knowledge ===\n{item.knowledge}\n\n"
        f"Question: {item.question}\n\n=== Reference answer ===\n{item.reference_answer}\n\n"
        f"=== Candidate answer ===\n{item.answer.strip() or '(empty)'}\n\n"
        "Rate the candidate answer on three criteria, each an integer from 1 (worst) to 5 (best):\n"
        "- accuracy: does it reach the reference's conclusions and answer the question fully?\n"
        "- numerical_correctness: are its numbers and calculations correct?\n"
        "- evidence_entailment: do the paragraphs it cites support what each clause says?\n"
        'Reply with JSON only: {"accuracy": <1-5>, "numerical_correctness": <1-5>, '
        '"evidence_entailment": <1-5>}'
    )


_SCORE_PATTERNS = {
    name: re.compile(
        rf"(?<![A-Za-z_]){pattern}[\"'*]*\s*[:=]\s*(?:[\"']\s*)?([1-5])(?:\.0+)?(?![0-9.])", re.IGNORECASE
    )
    for name, pattern in {
        "accuracy": r"accuracy",
        "numerical_correctness": r"numerical[ _]?(?:correctness|accuracy)?",
        "evidence_entailment": r"evidence[ _]?(?:entailment)?",
    }.items()
}


def parse_verdict(text: str | None) -> JudgeVerdict | None:
    """The three scores from a judge's reply (JSON, or "accuracy: 4" style lines); None
    when any is missing or outside 1..5.

    >>> parse_verdict('```json\\n{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}\\n```')
    JudgeVerdict(accuracy=4, numerical_correctness=3, evidence_entailment=5)
    >>> parse_verdict("Accuracy: 6") is None
    True
    """
    if not isinstance(text, str):
        return None
    scores = {}
    for name, pattern in _SCORE_PATTERNS.items():
        match = pattern.search(text)
        if match is None:
            return None
        scores[name] = int(match.group(1))
    return JudgeVerdict(**scores)


def judge_requests(items: Sequence[CorpusItem]) -> list:
    """One request per document. The reply is a short JSON object, so ``max_tokens`` is
    :data:`JUDGE_MAX_TOKENS` unless the task metadata sets ``judge_max_tokens``."""
    from lm_eval_fin.judge import JudgeRequest

    max_tokens = int(_scoring(items).get("judge_max_tokens") or JUDGE_MAX_TOKENS)
    return [
        JudgeRequest(
            messages=(
                {"role": "system", "content": _JUDGE_SYSTEM},
                {"role": "user", "content": judge_prompt(item)},
            ),
            max_tokens=max_tokens,
            json_schema=JUDGE_SCHEMA,
        )
        for item in items
    ]


def judge_items(items: Sequence[CorpusItem], judge) -> list:
    """One batched judge pass over all documents (re-asking only unparsable replies): one
    :class:`~lm_eval_fin.judge.ParsedAnswer` per document, its value a :class:`JudgeVerdict`."""
    from lm_eval_fin.judge import complete_parsed_answers

    return complete_parsed_answers(judge, judge_requests(items), parse_verdict, desc="FinLFQA judge")


def summarise_verdicts(
    verdicts: Sequence[JudgeVerdict | None], errors: Sequence[str | None] | None = None
) -> dict[str, float]:
    """Means over the documents the judge scored. Over all documents: ``judge_failure``, the
    share whose judge request failed for good (``errors``, one per document, None where the
    judge answered), and ``judge_parse_failure``, the share it answered unreadably."""
    errors = list(errors) if errors is not None else [None] * len(verdicts)
    scored = [v for v in verdicts if v is not None]
    failed = sum(error is not None for error in errors)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    def rate(count: int) -> float:
        return count / len(verdicts) if verdicts else math.nan

    return {
        "judge_score": mean([v.total for v in scored]),
        "judge_accuracy": mean([v.accuracy for v in scored]),
        "judge_numerical": mean([v.numerical_correctness for v in scored]),
        "judge_entailment": mean([v.evidence_entailment for v in scored]),
        "judge_parse_failure": rate(sum(v is None and e is None for v, e in zip(verdicts, errors))),
        "judge_failure": rate(failed),
        "judge_skipped": 0.0,
    }


def summarise_answers(answers: Sequence) -> dict[str, float]:
    """:func:`summarise_verdicts` of the :class:`~lm_eval_fin.judge.ParsedAnswer` s of :func:`judge_items`."""
    return summarise_verdicts([a.value for a in answers], [a.error for a in answers])


SKIPPED_JUDGE = {
    "judge_score": math.nan, "judge_accuracy": math.nan, "judge_numerical": math.nan,
    "judge_entailment": math.nan, "judge_parse_failure": math.nan, "judge_failure": math.nan,
    "judge_skipped": 1.0,
}

# lm-eval's higher_is_better of the metrics :func:`rescore` reports (the task's metric_list
# says the same); `lm-eval-fin score` looks it up beside ``rescore``
HIGHER_IS_BETTER = {
    "judge_score": True, "judge_accuracy": True, "judge_numerical": True, "judge_entailment": True,
    "judge_parse_failure": False, "judge_failure": False, "judge_skipped": False,
}


def _judge_failed(items: Sequence[CorpusItem], error: str) -> dict[str, float]:
    return summarise_verdicts([None] * len(items), [error] * len(items))


def _judge_metrics(items: Sequence[CorpusItem]) -> dict[str, float]:
    """The judge metrics of a run, at aggregation time: after generation, so nothing here
    raises. No judge configured: NaN and ``judge_skipped`` 1. A judge that cannot be set up
    or whose backend raises: NaN and ``judge_failure`` 1. Each with a warning."""
    from lm_eval_fin.judge import load_judge
    from lm_eval_fin.judge.options import resolve_options

    settings = _scoring(items)
    try:
        # spec and options were checked at dataset load; the environment may have changed since
        judge = load_judge(settings.get("judge") or None, resolve_options(settings.get("judge_options")))
    except Exception as exc:  # noqa: BLE001 - a setup problem must not discard the generations
        logger.warning(
            "FinLFQA: the judge cannot be set up (%s); the judge metrics are NaN and judge_failure "
            "is 1. Re-score the logged samples with `lm-eval-fin score <output dir> --judge <spec>`.", exc,
        )
        return _judge_failed(items, f"judge setup: {exc}")
    if judge is None:
        logger.warning(
            "FinLFQA: no judge configured ($LM_EVAL_FIN_JUDGE or --metadata '{\"judge\": ...}'); "
            "the LLM-as-judge metrics are NaN and judge_skipped is 1. Score later with "
            "`lm-eval-fin score <output dir> --judge <spec>`."
        )
        return dict(SKIPPED_JUDGE)
    try:
        answers = judge_items(items, judge)
    except Exception as exc:  # a backend that fails for good must not discard the generations
        logger.exception(
            "FinLFQA: judge %s failed; the judge metrics are NaN and judge_failure is 1. Re-score "
            "the logged samples with `lm-eval-fin score`.", judge.spec,
        )
        return _judge_failed(items, f"{type(exc).__name__}: {exc}")
    metrics = summarise_answers(answers)
    logger.info("FinLFQA judge %s: %s", judge.spec, judge.last_batch.summary())
    failed = sum(answer.failed for answer in answers)
    if failed:
        logger.warning(
            "FinLFQA: %d of %d judge requests failed for good (judge_failure %.3f; first error: %s); "
            "re-score the logged samples with `lm-eval-fin score`, which resumes from the judge cache.",
            failed, len(answers), metrics["judge_failure"], next(a.error for a in answers if a.failed),
        )
    return metrics


def judge_metric(name: str) -> Callable[[Sequence[CorpusItem]], float]:
    """The aggregation for one judge metric; all of them share one judge pass."""

    def aggregate(items: Sequence[CorpusItem]) -> float:
        return _memoised("judge", items, _judge_metrics)[name]

    aggregate.__name__ = f"aggregate_{name}"
    return aggregate


# ------------------------------------------------------------------- re-scoring logged samples


def _response(sample: dict) -> str:
    """The model's answer in an lm-eval sample: ``filtered_resps`` (one per request, each
    the answer text or a one-element list), falling back to ``resps``."""
    for key in ("filtered_resps", "resps"):
        value = sample.get(key)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return ""


def rescore(samples: Sequence[dict], judge) -> tuple[dict[str, float], list[dict]]:
    """Judge metrics for samples logged by ``lm_eval --log_samples`` on fin_lfqa (for
    instance after ``--predict_only``), in one batched pass; and per-sample details: doc_id,
    ``judge_failure`` and ``judge_error`` (the request failed for good), ``parse_failure``
    (the reply was unreadable), ``judge_reply`` (the judge's last raw reply) and, when
    scored, the three scores and their total."""
    items = []
    for sample in samples:
        doc = sample.get("doc")
        if not isinstance(doc, dict) or "reports" not in doc:
            raise ValueError(
                f"sample {sample.get('doc_id')!r} has no FinLFQA document; was it logged by fin_lfqa?"
            )
        items.append(corpus_item(doc, _response(sample)))
    answers = judge_items(items, judge)
    details = []
    for sample, answer in zip(samples, answers):
        detail: dict[str, Any] = {
            "doc_id": sample.get("doc_id"),
            "judge_failure": answer.failed,
            "parse_failure": answer.unparsed,
            "judge_error": answer.error,
            "judge_reply": answer.text,
        }
        if answer.value is not None:
            detail.update(dataclasses.asdict(answer.value), judge_score=answer.value.total)
        details.append(detail)
    return summarise_answers(answers), details
