"""The FinLFQA prompt (the paper's end-to-end setting, in our own words) and its answer format.

The model answers in numbered clauses; under each, ``Evidence:`` (the report paragraphs that
support it, per company), ``Code:`` (a Python function for a computed number, or "none") and
``Knowledge:`` (the knowledge entries it uses). :func:`render_answer` writes the reference in
the same format (the task's target, and what the judge compares against).
"""

from __future__ import annotations

from collections.abc import Sequence

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

