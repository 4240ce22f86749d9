"""FinLFQA (Long et al., EMNLP Findings 2025) data: the hub schema and our task documents.

:func:`read_example` is the one place that knows the hub's field names; :func:`to_document`
renders each example's two 10-Q excerpts and its professional-knowledge list with the indices
the evidence and knowledge attributions refer to, and keeps the reference answer's clauses as
JSON text. The indices start at the dataset's base (:func:`detect_index_base`): the paper's 1
unless the gold indices show 0, or the metadata says.

Hub schema (``Dragongon/FinLFQA``): ``question`` (text), ``context`` (JSON: ticker -> report
paragraphs, text or tables), ``clauses`` (JSON: the reference answer's clauses, each with its
text, evidence per ticker, code and knowledge; empty where the split's answers are private)
and the knowledge list under one of :data:`KNOWLEDGE_LIST_FIELDS`. A local copy in the same
schema is JSON (a list, or an object with one list per split), JSON Lines or parquet.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin import attribution
from lm_eval_fin.plumbing.jsonl import check_unique_ids, read_jsonl, read_text
from lm_eval_fin.text.jsontext import field

logger = logging.getLogger(__name__)

HUB_DATASET = "Dragongon/FinLFQA"
SPLITS = ("validation", "test")
# The hub's JSON lists carry no explicit indices. The paper numbers paragraphs and knowledge
# entries from 1 (section 3.1: i_j in 1..|D|, k_j in 1..|K|), so 1 is the default, unless
# the data's own gold indices say otherwise (:func:`detect_index_base`); metadata overrides.
PAPER_INDEX_BASE = 1
INDEX_BASES = (0, 1)

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


_REPORT_HEADER = re.compile(r"^=== (?P<company>.+): 10-Q report excerpt ===$")
_PARAGRAPH_START = re.compile(r"^\[(?:[0-9]+\] |\.\.\. )")  # "[3] text", or a cut mark's "[... "


def split_reports(reports: str) -> list[tuple[str, list[str]]]:
    """:func:`render_reports`'s text back into (header line, paragraphs) per company; a
    paragraph runs on over its lines (a table's rows) up to the next "[N] " line (or the line
    that says paragraphs were left out)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in reports.split("\n"):
        if _REPORT_HEADER.match(line):
            blocks.append((line, []))
        elif not blocks:
            blocks.append(("", [line]))
        elif _PARAGRAPH_START.match(line) or not blocks[-1][1]:
            blocks[-1][1].append(line)
        else:
            blocks[-1][1][-1] += "\n" + line
    for _, paragraphs in blocks:  # the blank line render_reports puts between two companies
        while paragraphs and not paragraphs[-1].strip():
            paragraphs.pop()
        if paragraphs:
            paragraphs[-1] = paragraphs[-1].rstrip("\n")
    return blocks


def join_reports(blocks: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The inverse of :func:`split_reports`."""
    return "\n\n".join("\n".join(([header] if header else []) + list(paragraphs)) for header, paragraphs in blocks)


def render_knowledge(entries: Sequence[Any], index_base: int) -> str:
    return "\n".join(
        f"[{index_base + i}] {render_paragraph(entry)}" for i, entry in enumerate(entries)
    )


# ------------------------------------------------------------------------------ hub schema


def _decoded(value: Any) -> Any:
    """The hub keeps nested values as JSON strings; local copies may hold them decoded."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        return json.loads(value)
    return value


@dataclass(frozen=True)
class Example:
    """One hub record read, before its indices are rendered."""

    position: int
    identifier: str
    question: str
    context: dict[str, Any]
    knowledge: list[Any]
    reference: list[dict]
    where: str = ""  # "file:line" (or "file: record N") of the record, for messages


def read_example(record: dict, position: int = 0, where: str | None = None) -> Example:
    """One hub record, checked (the only function that knows the hub's names).

    Hub schema: ``question`` (text), ``context`` (JSON: ticker -> report paragraphs),
    ``clauses`` (JSON: the reference answer's clauses, each with its text, evidence per
    ticker, code and knowledge; empty where the split has no public answers) and the
    professional-knowledge list under one of :data:`KNOWLEDGE_LIST_FIELDS`.
    Raises :class:`SchemaError` naming where the record is (``where``: "file:line"; else its
    position), the missing part and the fields found.
    """
    place = where or f"FinLFQA record {position}"
    if not isinstance(record, dict):
        raise SchemaError(f"{place}: expected a JSON object, got {type(record).__name__}")
    try:
        return _read_example(record, position, place)
    except SchemaError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a shape the readers below do not expect
        raise SchemaError(f"{place}: cannot be read ({type(exc).__name__}: {exc})") from None


def _read_example(record: dict, position: int, place: str) -> Example:
    found = sorted(map(str, record))

    def missing(what: str) -> SchemaError:
        return SchemaError(
            f"{place}: no {what}; fields found: {found}. Expected the hub "
            f"schema of {HUB_DATASET}: question, context, clauses and the knowledge list "
            f"(one of {list(KNOWLEDGE_LIST_FIELDS)})."
        )

    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise missing("'question' text")
    try:
        context = _decoded(record.get("context"))
        clauses = _decoded(record.get("clauses"))
        knowledge_name, knowledge = field(record, KNOWLEDGE_LIST_FIELDS)
        knowledge = _decoded(knowledge)
    except ValueError as exc:
        raise SchemaError(f"{place}: a JSON field does not decode ({exc})") from exc
    if not isinstance(context, dict) or not context:
        raise missing("'context' (a JSON object keyed by the two companies' tickers)")
    if knowledge_name is None:
        raise missing("professional-knowledge list")
    if isinstance(knowledge, str):
        knowledge = [line for line in knowledge.split("\n") if line.strip()]
    if not isinstance(knowledge, list):
        raise SchemaError(
            f"{place}: field {knowledge_name!r} should be a list of knowledge "
            f"entries, got {type(knowledge).__name__}; fields found: {found}"
        )
    companies = [str(c) for c in context]
    reference = [] if clauses in (None, "", []) else _reference_clauses(clauses, companies, place)
    _, identifier = field(record, ID_FIELDS)
    return Example(
        position=position,
        identifier=str(identifier) if identifier is not None else f"finlfqa-{position}",
        question=question.strip(),
        context={str(c): report for c, report in context.items()},
        knowledge=knowledge,
        reference=reference,
        where=place,
    )


def to_document(record: dict | Example, position: int = 0, index_base: int = PAPER_INDEX_BASE) -> dict:
    """One hub record (or :class:`Example`) -> one task document, its paragraphs and knowledge
    entries numbered from ``index_base``."""
    example = record if isinstance(record, Example) else read_example(record, position)
    _warn_if_out_of_range(example, index_base)
    return {
        "id": example.identifier,
        "question": example.question,
        "companies": list(example.context),
        "reports": render_reports(example.context, index_base),
        "knowledge": render_knowledge(example.knowledge, index_base),
        # JSON text: the clauses' shapes vary too much for an Arrow column.
        "reference_clauses": json.dumps(example.reference, ensure_ascii=False),
        "has_reference": bool(example.reference),
        "index_base": index_base,
    }


# ------------------------------------------------------------------------------ index base


def _positional(report: Any) -> bool:
    """Whether a report's paragraphs are numbered by position (a list), not by its own keys."""
    if isinstance(report, str):
        try:
            report = json.loads(report)
        except ValueError:
            return True
    return not (isinstance(report, dict) and report and all(str(k).strip().isdigit() for k in report))


def index_signals(example: Example) -> tuple[bool, bool]:
    """(a gold index is 0, a gold index equals its list's length) over the example's
    evidence (reports numbered by position) and knowledge."""
    sizes = {c: len(indexed_paragraphs(r, 0)) for c, r in example.context.items() if _positional(r)}
    cited = [(index, sizes[company]) for clause in example.reference
             for company, index in clause["evidence"] if company in sizes]
    cited += [(index, len(example.knowledge)) for clause in example.reference for index in clause["knowledge"]]
    return any(index == 0 for index, _ in cited), any(index == size for index, size in cited)


@dataclass(frozen=True)
class IndexBase:
    base: int
    source: str  # "metadata", "data" or "paper"


def detect_index_base(examples: Sequence[Example], given: int | None = None) -> IndexBase:
    """The index base of a dataset: ``given`` (the metadata's) if any; else what its gold
    indices show (any 0 means 0-based; any index equal to its list's length means 1-based);
    else the paper's, 1. Gold indices showing both stop the load (name one example of each,
    and say how to choose), unless ``given``."""
    zero = next((e for e in examples if index_signals(e)[0]), None)
    past = next((e for e in examples if index_signals(e)[1]), None)
    if given is not None:
        contrary = zero if given == 1 else past if given == 0 else None
        if contrary is not None:
            logger.warning("FinLFQA: index_base %d from the metadata, but the data's gold indices suggest "
                           "otherwise (%s)", given, contrary.where or contrary.position)
        return IndexBase(given, "metadata")
    if zero and past:
        raise SchemaError(
            f"FinLFQA: the gold indices read both as 0-based ({zero.where or zero.position} cites index 0) and "
            f"as 1-based ({past.where or past.position} cites an index equal to its list's length); choose with "
            "--metadata '{\"index_base\": 0}' or 1"
        )
    if zero:
        return IndexBase(0, "data")
    if past:
        return IndexBase(1, "data")
    return IndexBase(PAPER_INDEX_BASE, "paper")


def _reference_clauses(clauses: Any, companies: list[str], place: str) -> list[dict]:
    if isinstance(clauses, dict):
        _, clauses = field(clauses, ("clauses", "answer"))
    if not isinstance(clauses, list):
        raise SchemaError(f"{place}: 'clauses' should decode to a list of clauses")
    reference = []
    for number, clause in enumerate(clauses):
        if not isinstance(clause, dict):
            raise SchemaError(f"{place}, clause {number}: expected an object, got {clause!r:.80}")
        text_name, text = field(clause, CLAUSE_TEXT_FIELDS)
        evidence_name, evidence = field(clause, CLAUSE_EVIDENCE_FIELDS)
        if text_name is None or not isinstance(text, str) or evidence_name is None:
            raise SchemaError(
                f"{place}, clause {number}: needs its text (one of "
                f"{list(CLAUSE_TEXT_FIELDS)}) and evidence (one of {list(CLAUSE_EVIDENCE_FIELDS)}); "
                f"fields found: {sorted(map(str, clause))}"
            )
        reference.append({
            "text": text.strip(),
            "evidence": [list(pair) for pair in attribution.evidence_from_json(_decoded(evidence), companies)],
            "code": list(attribution.code_from_json(field(clause, CLAUSE_CODE_FIELDS)[1])),
            "knowledge": list(attribution.knowledge_from_json(field(clause, CLAUSE_KNOWLEDGE_FIELDS)[1])),
        })
    return reference


def _warn_if_out_of_range(example: Example, index_base: int) -> None:
    """An index outside its list is the sign of indices read with the wrong base."""
    sizes = {c: len(indexed_paragraphs(r, index_base)) for c, r in example.context.items() if _positional(r)}
    for clause in example.reference:
        for company, index in clause["evidence"]:
            if company in sizes and not index_base <= index < index_base + sizes[company]:
                logger.warning(
                    "FinLFQA record %d cites %s paragraph %d, outside %d..%d: check "
                    "--metadata index_base (now %d)", example.position, company, index, index_base,
                    index_base + sizes[company] - 1, index_base,
                )
                return
        for index in clause["knowledge"]:
            if not index_base <= index < index_base + len(example.knowledge):
                logger.warning(
                    "FinLFQA record %d cites knowledge %d, outside %d..%d: check --metadata "
                    "index_base (now %d)", example.position, index, index_base,
                    index_base + len(example.knowledge) - 1, index_base,
                )
                return


Located = tuple[str, Any]  # ("file:line" or "file: record N", the record)


def _json_list(text: str, path: Path) -> list[Located]:
    """The elements of the JSON list ``text`` is, each with the line it starts on."""
    decoder = json.JSONDecoder()
    items: list[Located] = []
    position = text.index("[") + 1
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            return items
        where = f"{path}:{text.count(chr(10), 0, position) + 1}"
        value, position = decoder.raw_decode(text, position)
        items.append((where, value))


def _not_json(path: Path, exc: json.JSONDecodeError) -> SchemaError:
    return SchemaError(f"{path}:{exc.lineno}: not JSON ({exc.msg}, column {exc.colno})")


def read_records(data_path: str | Path, split: str | None = None) -> list[Located]:
    """Records of a local copy in the hub schema, each with where it is ("file:line"): JSON
    (a list, or an object with one list per split, of which ``split``'s is read), JSON Lines,
    or parquet (one split per file; "file: row N"). A file that is not UTF-8 or not JSON is a
    :class:`SchemaError` naming the file and the line."""
    path = Path(data_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"FinLFQA data_path {str(path)!r} is not a file (JSON, JSONL or parquet)")
    if path.suffix == ".parquet":
        import pyarrow.parquet

        return [(f"{path}: row {row}", record)
                for row, record in enumerate(pyarrow.parquet.read_table(path).to_pylist(), start=1)]
    if path.suffix == ".jsonl":
        return list(read_jsonl(path, SchemaError))
    text = read_text(path, SchemaError)
    try:
        data = json.loads(text)
        if isinstance(data, list):
            return _json_list(text, path)
    except json.JSONDecodeError as exc:
        raise _not_json(path, exc) from None
    if isinstance(data, dict):
        splits = [key for key in SPLITS if isinstance(data.get(key), list)]
        if splits:
            wanted = split or "validation"
            if wanted not in splits:
                raise SchemaError(
                    f"{path}: holds the split(s) {splits} but not {wanted!r}; give a file with a "
                    f"{wanted!r} list (or one list of records) as data_path"
                )
            return [(f"{path}: {wanted} record {n}", r) for n, r in enumerate(data[wanted], start=1)]
        for key in ("data", "examples"):
            if isinstance(data.get(key), list):
                return [(f"{path}: {key} record {n}", r) for n, r in enumerate(data[key], start=1)]
        raise SchemaError(f"{path}: a JSON object without a list of records (keys: {sorted(data)})")
    raise SchemaError(f"{path}: expected a JSON list of records")


def load_hub_records(split: str) -> list[Located]:
    import datasets

    try:
        rows = datasets.load_dataset(HUB_DATASET, split=split)
    except Exception as exc:  # noqa: BLE001 - offline, unknown split: say what to do instead
        raise RuntimeError(
            f"could not load {HUB_DATASET} split {split!r} ({type(exc).__name__}: {exc}). "
            "Offline? Pass a local copy with --metadata '{\"data_path\": \"<json/jsonl/parquet>\"}'."
        ) from exc
    return [(f"{HUB_DATASET} {split}: row {row}", record) for row, record in enumerate(rows, start=1)]


def read_examples(split: str = "validation", data_path: str | None = None) -> list[Example]:
    """Every record of the split (the hub's, or the local copy at ``data_path``) read and
    checked, each knowing where it came from. An empty file, a record that is not in the hub
    schema and two records with one id are :class:`SchemaError` s naming the file and the
    line (both lines for a repeated id: ids key the steps of a multi-step run and the details
    a report joins to each answer, so a repeated one would mix two documents up)."""
    if split not in SPLITS:
        raise ValueError(f"FinLFQA split must be one of {SPLITS}, got {split!r}")
    records = read_records(data_path, split) if data_path else load_hub_records(split)
    if not records:
        raise SchemaError(f"{Path(data_path).expanduser() if data_path else HUB_DATASET}: holds no records; "
                          f"expected the hub schema of {HUB_DATASET}")
    examples = [read_example(record, position, where) for position, (where, record) in enumerate(records)]
    check_unique_ids(((example.identifier, example.where) for example in examples), SchemaError)
    return examples


def unreferenced(examples: Sequence[Example]) -> list[Example]:
    """The examples without a reference answer (nothing to score an answer against)."""
    return [example for example in examples if not example.reference]


def documents(examples: Sequence[Example], index_base: int | None = None) -> tuple[list[dict], IndexBase]:
    """Task documents of ``examples``, numbered from ``index_base`` (None:
    :func:`detect_index_base`), and the base used."""
    base = detect_index_base(examples, index_base)
    logger.info("FinLFQA: paragraphs and knowledge numbered from %d (%s)", base.base, base.source)
    return [to_document(example, index_base=base.base) for example in examples], base


def load_documents(
    split: str = "validation", data_path: str | None = None, index_base: int | None = None
) -> tuple[list[dict], IndexBase]:
    """:func:`documents` of the hub split, or of a local copy when ``data_path`` is given."""
    return documents(read_examples(split, data_path), index_base)


def reference_clauses(doc: dict) -> list[dict]:
    return json.loads(doc["reference_clauses"]) if doc.get("reference_clauses") else []


def reference_text(doc: dict) -> str:
    return "\n".join(clause["text"] for clause in reference_clauses(doc))

