"""FinAgentBench challenge files: reading, checking and turning them into task documents.

The public files of the ACM ICAIF 2025 agentic retrieval challenge (built on FinAgentBench,
Choi et al. 2025) hold one JSON record per line:

* ``uuid`` (dev files) or ``_id`` (eval files): the query id;
* ``messages``: a single user message carrying the whole prompt: the question, the candidates
  as ``[<Something> Index N] text`` blocks, and the instruction to answer with a bracketed list;
* ``qrel`` (dev files only): candidate index (a string) -> graded relevance (0..4 for document
  types, 0/1/2 for chunks).

There is no hub copy; users download the files and pass them with
``--metadata '{"data_path": "<file or folder>"}'``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench.prompt import candidates_of, prompt_text
from lm_eval_fin.plumbing.jsonl import check_unique_ids, read_jsonl

EXPECTED = (
    "a FinAgentBench challenge JSONL file (or a folder of them): one JSON object per line with "
    "'uuid' or '_id', 'messages' (one user message holding the prompt) and, in dev files, "
    "'qrel' (candidate index -> grade)"
)

# Which files of a folder belong to which task.
FILE_PATTERNS = {"document": "document_ranking*.jsonl", "chunk": "chunk_ranking*.jsonl"}



class ChallengeFormatError(ValueError):
    """A file or record is not in the challenge format."""


def find_files(data_path: str | Path, kind: str) -> list[Path]:
    """The JSONL files for ``kind`` ("document" or "chunk"): the file itself, or the files of a
    folder that match the challenge's naming (``document_ranking_*.jsonl`` /
    ``chunk_ranking_*.jsonl``)."""
    path = Path(data_path).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.glob(FILE_PATTERNS[kind]))
        if not files:
            raise ChallengeFormatError(
                f"{path} holds no {FILE_PATTERNS[kind]} file; expected {EXPECTED}"
            )
        return files
    raise FileNotFoundError(f"data_path {str(path)!r} does not exist; expected {EXPECTED}")


def check_record(record: Any, where: str) -> dict:
    """The record if it has the challenge shape, else a ChallengeFormatError naming the gap."""
    if not isinstance(record, dict):
        raise ChallengeFormatError(f"{where}: not a JSON object; expected {EXPECTED}")
    if "uuid" not in record and "_id" not in record:
        raise ChallengeFormatError(f"{where}: no 'uuid' or '_id' (keys: {sorted(record)}); expected {EXPECTED}")
    messages = record.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)
    ):
        raise ChallengeFormatError(f"{where}: 'messages' must be a list of messages with text content; expected {EXPECTED}")
    qrel = record.get("qrel")
    if qrel is not None and not isinstance(qrel, dict):
        raise ChallengeFormatError(f"{where}: 'qrel' must map candidate index -> grade")
    for index, grade in (qrel or {}).items():
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not math.isfinite(grade):
            raise ChallengeFormatError(
                f"{where}: 'qrel' grade of candidate {index} is {grade!r}, not a number; grades are numbers "
                "(0..4 for document types, 0/1/2 for chunks)"
            )
    return record


def read_records(data_path: str | Path, kind: str = "document") -> list[tuple[str, dict]]:
    """Every record of the challenge file(s) at ``data_path``, checked, with where it is
    ("file:line"). An empty file and a query id given twice (ids key the rankings written and
    the samples compared across runs) are errors naming the lines."""
    records = [
        (where, check_record(record, where))
        for file in find_files(data_path, kind)
        for where, record in read_jsonl(file, ChallengeFormatError)
    ]
    if not records:
        raise ChallengeFormatError(f"{data_path} holds no records; expected {EXPECTED}")
    check_unique_ids(((str(record.get("uuid", record.get("_id"))), where) for where, record in records),
                     ChallengeFormatError, "query id", "its own 'uuid' or '_id'")
    return records


def load_records(data_path: str | Path, kind: str = "document") -> list[dict]:
    """All records of the challenge file(s) at ``data_path``, checked (:func:`read_records`)."""
    return [record for _, record in read_records(data_path, kind)]


def ungraded(records: Iterable[tuple[str, dict]]) -> list[str]:
    """Where the records without grades are (no ``qrel``, or ``qrel: null``: eval files)."""
    return [where for where, record in records if record.get("qrel") is None]


def to_documents(records: Iterable[dict], with_labels: bool) -> list[dict]:
    """Task documents: the prompt as the challenge gives it, the candidate indices, and the
    grades as JSON text (empty for eval files).

    ``with_labels`` keeps the candidates' texts as labels for the ranking parser; meant for
    the document-type task, whose candidates are short names ("10-K", "Earnings").
    """
    documents = []
    for record in records:
        qrel = record.get("qrel")
        candidates = candidates_of(record)
        documents.append(
            {
                "id": str(record.get("uuid", record.get("_id"))),
                "prompt": prompt_text(record),
                "candidates": sorted(candidates),
                "labels": json.dumps({str(k): v for k, v in candidates.items()} if with_labels else {}),
                "qrel": json.dumps({str(k): v for k, v in qrel.items()}) if qrel is not None else "",
            }
        )
    return documents
