"""FinLFQA records written in the hub schema of Dragongon/FinLFQA (question; context and
clauses as JSON strings), short enough for CPU generation with the embedded model."""

from __future__ import annotations

import json
from pathlib import Path

CWT_REPORT = [
    "California Water Service Group (CWT) reports quarterly results.",
    [["Item", "Q1 2024", "Q1 2023"], ["Net interest expense", "125", "100"]],
    "CWT funded capital spending with short-term borrowings.",
]
AWK_REPORT = [
    "American Water Works (AWK) serves 14 million people.",
    [["Item", "Q1 2024", "Q1 2023"], ["Net interest expense", "110", "110"]],
]
KNOWLEDGE = [
    "Growth rate = (current - prior) / prior * 100",
    "Interest coverage = EBIT / interest expense",
]
CLAUSES = [
    {
        "clause": "CWT's net interest expense rose 25.00% from $100 million to $125 million.",
        "evidence": {"CWT": [1], "AWK": []},
        "code": "def cwt_interest_growth():\n    return (125 - 100) / 100 * 100",
        "knowledge": [0],
    },
    {
        "clause": "AWK's net interest expense was flat at $110 million.",
        "evidence": {"CWT": [], "AWK": [1]},
        "code": None,
        "knowledge": None,
    },
]


def hub_record(**overrides) -> dict:
    record = {
        "id": "cwt-awk-1",
        "question": "How did net interest expense change for CWT and AWK in Q1 2024?",
        "context": json.dumps({"CWT": CWT_REPORT, "AWK": AWK_REPORT}),
        "clauses": json.dumps(CLAUSES),
        "knowledge": json.dumps(KNOWLEDGE),
    }
    record.update(overrides)
    return {key: value for key, value in record.items() if value is not ...}


def hub_records() -> list[dict]:
    second = hub_record(
        id="cwt-awk-2",
        question="Which company relied more on short-term debt in Q1 2024?",
        clauses=json.dumps([
            {
                "clause": "CWT relied more on short-term borrowings than AWK.",
                "evidence": {"CWT": [2], "AWK": [0]},
                "code": None,
                "knowledge": [],
            }
        ]),
    )
    return [hub_record(), second]


def write_hub_fixture(path: Path, records: list[dict] | None = None) -> Path:
    """The records as a JSON Lines file (the form of a local copy of the hub split)."""
    records = hub_records() if records is None else records
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path
