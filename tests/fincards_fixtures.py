"""A synthetic filing in the challenge format and a deterministic lexical judge for FinCARDS.

The judge answers each FinCARDS request kind (recognised by its JSON schema's title) by word
overlap with the question, so the stage logic can be tested with answers we can predict.
It can also leave kinds unusable (``broken``: an answer no parser reads) or fail them
(``failing``: no answer at all, as when the judge's server is down).
"""

import json
import re

from lm_eval_fin.judge import JudgeResponse
from tests.finagentbench_fixtures import chunk_prompt, write_jsonl

FILING = [
    "Northwind Corp designs industrial pumps and water treatment systems for utilities.",
    "Total revenue for fiscal 2025 was $1,240.5 million, up 8.2% from $1,146.5 million in fiscal 2024.",
    "Segment revenue | 2025 | 2024 | Change\nPumps | 820.1 | 760.3 | 7.9%\nWater | 420.4 | 386.2 | 8.9%",
    "Adjusted EBITDA is defined as net income before interest, taxes, depreciation and amortization, "
    "excluding restructuring charges.",
    "Forward-looking statements involve risks; actual results may differ materially from expectations.",
    "Net income for fiscal 2025 was $96.3 million compared with $81.0 million in fiscal 2024.",
]
QUERIES = [
    ("q-trend", "How did Northwind segment revenue change from 2024 to 2025?", {"2": 2, "1": 1, "0": 0, "3": 0, "4": 0, "5": 0}),
    ("q-define", "How does Northwind define adjusted EBITDA?", {"3": 2, "5": 1, "0": 0, "1": 0, "2": 0, "4": 0}),
]


def filing_records(with_qrel=True, doc_type=None):
    """The two queries on FILING; ``doc_type`` is written as the records' ``doc_type`` field."""
    records = []
    for uid, question, qrel in QUERIES:
        record = {"uuid": uid, "messages": [{"role": "user", "content": chunk_prompt(question, FILING)}]}
        if with_qrel:
            record["qrel"] = qrel
        if doc_type is not None:
            record["doc_type"] = doc_type
        records.append(record)
    return records


# A 10-Q's cover chunk: the rules read the filing type from it.
COVER_10Q = (
    "UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-Q\nQUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) "
    "OF THE SECURITIES EXCHANGE ACT OF 1934\nFor the quarterly period ended March 31, 2025. See also our Form 10-K."
)


def write_filing(path, with_qrel=True):
    return write_jsonl(path, filing_records(with_qrel))


_WORD = re.compile(r"[a-z0-9]+")
_STOP = set("the a an of for in to from and how did does was is what by with".split())


def _words(text):
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _question(content):
    match = re.search(r"Question: (.*)", content)
    return match.group(1) if match else ""


def _card_lines(content):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\[(\d+)\] (.*)$", content, re.MULTILINE)}


def _chunk_blocks(content):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\[Chunk Index (\d+)\] (.*)$", content, re.MULTILINE)}


def _by_overlap(question, texts):
    wanted = _words(question)
    return sorted(texts, key=lambda i: (-len(wanted & _words(texts[i])), i))


class LexicalJudge:
    """Deterministic stand-in for an LLM judge: word overlap decides everything.

    ``broken`` kinds get an unusable answer, ``failing`` kinds no answer (an error).
    ``requests`` records every request it saw.
    """

    spec = "test:lexical"

    def __init__(self, broken=(), failing=()):
        self.broken = set(broken)
        self.failing = set(failing)
        self.requests = []

    def complete(self, requests, desc="judge"):
        self.requests.extend(requests)
        return [self._respond(r) for r in requests]

    def _respond(self, request):
        if request.json_schema["title"] in self.failing:
            return JudgeResponse(None, error="connection refused")
        return JudgeResponse(self._answer(request), prompt_tokens=10, completion_tokens=2)

    def _answer(self, request):
        kind = request.json_schema["title"]
        if kind in self.broken:
            return "I would rather not say."
        content = request.messages[-1]["content"]
        question = _question(content)
        if kind == "fincards_core_card":
            text = content.split("Chunk:\n", 1)[1].rsplit("\n\nEvidence card", 1)[0]
            years = sorted(set(re.findall(r"20\d\d", text)))
            figures = re.findall(r"\$[\d,.]+ million|\d+\.\d%", text)
            return json.dumps({
                "topic": "Revenue" if "revenue" in text.lower() else "Other",
                "metrics": [w for w in ("revenue", "net income", "adjusted EBITDA") if w.lower() in text.lower()],
                "period": f"FY{years[-1]}" if years else "",
                "entities": ["Northwind Corp"] if "Northwind" in text else [],
                "section": "MD&A",
                "summary": " ".join(text.split()[:12]),
                # the first figure as written, and one the chunk does not hold (the check drops it)
                "numeric_spans": figures[:1] + (["$999.9 million"] if figures else []),
            })
        if kind == "fincards_card":
            text = content.split("Chunk:\n", 1)[1].rsplit("\n\nEvidence card", 1)[0]
            table = "|" in text
            years = sorted(set(re.findall(r"20\d\d", text)))
            return json.dumps({
                "role": "definition" if "defined" in text else "primary_evidence",
                "evidence_type": "table_numeric" if table else "qualitative",
                "sketch": " ".join(text.split()[:12]),
                "topics": sorted(_words(text))[:3],
                "temporal": {"anchor": "explicit" if years else "none", "periods": years, "granularity": "year"},
                "verifiability": {"numeric_claim": bool(years), "units": [], "comparison": "none",
                                  "table": {"present": table, "time_columns": table, "change_columns": table,
                                            "total_row": False}},
                "measurement": {"basis": "unknown", "definition_present": "defined" in text},
            })
        if kind == "fincards_intent":
            relation = "trend" if "change" in question else ("definition" if "define" in question else "lookup")
            return json.dumps({"relation": relation, "metrics": ["revenue"], "keywords": sorted(_words(question))[:4],
                               "temporal": {"type": "explicit", "periods": re.findall(r"20\d\d", question),
                                            "granularity": "year"}, "numeric": relation != "definition"})
        if kind == "fincards_screening":
            lines = _card_lines(content)
            low, high = (int(x) for x in re.search(r"Keep between (\d+) and (\d+)", content).groups())
            ranked = _by_overlap(question, lines)[:low]
            wanted = _words(question)
            return json.dumps({"selected": [
                {"id": i, "score": 10 * len(wanted & _words(lines[i])), "reason": "word overlap"} for i in ranked
            ]})
        if kind == "fincards_ranking":
            return json.dumps({"ranking": _by_overlap(question, _card_lines(content))})
        if kind == "fincards_zeroshot":
            return json.dumps({"ranking": _by_overlap(question, _chunk_blocks(content))[:3]})
        raise AssertionError(f"unexpected request kind {kind}")
