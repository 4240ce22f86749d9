"""The FinLFQA prompts of the paper's three settings (its figures 3 to 6, in our own words),
and the answer format they share.

* End-to-end (``fin_lfqa``, figure 5): one pass writes numbered clauses and, under each,
  ``Evidence:`` (the report paragraphs that support it, per company, or "inferred from clause
  N"), ``Code:`` (for a calculated number, a Python function that performs the calculation
  and returns the result; or "none") and ``Knowledge:`` (the knowledge entries it uses).
* Post-hoc (``fin_lfqa-posthoc``): the answer alone first (figure 3: numbered one-sentence
  clauses, no knowledge list), then the attributes of each clause of that answer (figure 4:
  code as a function that takes the input values it needs, performs the calculation and
  returns the result).
* Iterative refinement (``fin_lfqa-iterative``): the end-to-end answer, then rounds of
  feedback on the analysis with its code's execution results (figure 6: reply "Done" when
  nothing needs correcting) and a revision that follows the feedback (the paper does not show
  its revision prompt; ours asks for the whole analysis again in the same format).

As the paper's, no prompt tells the model to write functions without parameters: the code
metric calls the function with none, and a function that needs arguments fails there (the
paper's most common code failure). For the same reason the worked examples show where the
code goes, not a function: a function without parameters, copied, would pass the call by
example, and one with parameters would fail by example (the paper's figures elide their
examples, so theirs cannot be followed). :func:`render_answer` writes clauses in the answer
format (the reference as the task's target and for the judge; the post-hoc answer with its
attributes).

Two 10-Q excerpts can outgrow a model's context, and lm-eval would cut the prompt from the
left, instructions and format example first. :func:`fit_reports` fits the excerpts instead,
when the dataset loads, to the longest prompt the setting will send (see its docstring); the
instructions, the format example, the question and the knowledge list are never cut.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lm_eval_fin.benchmarks.fin_lfqa.data import join_reports, split_reports
from lm_eval_fin.harness.fitting import PROMPT_MARGIN_TOKENS, PromptFitter

# What the examples show in a clause's code block: the slot, in words. A real function would
# decide the execution metric for a model that copies its shape (see the module docstring).
CODE_SLOT = "<the Python function that calculates this clause's number>"
_CODE_SLOT_NOTE = f"In the example, {CODE_SLOT} stands for your own code."

_FORMAT_EXAMPLE = f"""1. ABC's gross margin rose to 41.0% while XYZ's fell to 35.2%.
Evidence: ABC [4]; XYZ [7, 8]
Code:
```python
{CODE_SLOT}
```
Knowledge: [2]
2. ABC therefore prices its products more effectively than XYZ.
Evidence: inferred from clause 1
Code: none
Knowledge: []"""

_ANSWER_EXAMPLE = """1. ABC's gross margin rose to 41.0% in the quarter.
2. XYZ's gross margin fell to 35.2% over the same period.
3. ABC therefore prices its products more effectively than XYZ."""

_ATTRIBUTES_EXAMPLE = f"""1. Evidence: ABC [4]
Code:
```python
{CODE_SLOT}
```
Knowledge: [2]
2. Evidence: XYZ [7, 8]
Code: none
Knowledge: [2]
3. Evidence: inferred from clauses 1 and 2
Code: none
Knowledge: []"""

_ATTRIBUTE_LINES = (
    "Evidence: the paragraphs that support the clause, as TICKER [paragraph numbers] for each company, "
    "or \"inferred from clause N\" when it follows from earlier clauses.\n"
    "Code: {code}, in a ```python block; otherwise \"none\".\n"
    "Knowledge: the numbers of the professional-knowledge entries the clause uses, e.g. [3], or [] if none."
)
_E2E_CODE = (
    "when the clause states a number you calculated, a Python function that performs the calculation and "
    "returns the result"
)
_POSTHOC_CODE = (
    "when the clause states a number calculated from the reports, a Python function that takes the input "
    "values it needs, performs the calculation and returns the result"
)

DONE = "Done"


def _reports(doc: dict) -> str:
    return f"The excerpts of the quarterly (10-Q) reports of {' and '.join(doc['companies'])}:\n\n{doc['reports']}"


def _knowledge(doc: dict) -> str:
    return f"=== Professional knowledge ===\n{doc['knowledge']}"


def build_prompt(doc: dict) -> str:
    """The end-to-end prompt (figure 5): reports, question and knowledge list in; the answer
    and its attributes out in one pass."""
    return (
        "You are a financial analyst. Using the quarterly reports of two companies and a list of professional "
        "knowledge, answer a question about the companies. Write the answer as numbered clauses, one claim per "
        "clause, and give each clause three attributes on the lines under it:\n"
        + _ATTRIBUTE_LINES.format(code=_E2E_CODE)
        + f"\n\nAn example of the format (made-up companies ABC and XYZ):\n{_FORMAT_EXAMPLE}\n{_CODE_SLOT_NOTE}\n\n"
        f"{_reports(doc)}\n\nQuestion: {doc['question']}\n\n{_knowledge(doc)}\n\n"
        "Answer the question in numbered clauses, each with its Evidence, Code and Knowledge.\n\nAnswer:"
    )


def build_answer_prompt(doc: dict) -> str:
    """Post-hoc, step 1 (figure 3): the answer alone, from the reports and the question."""
    return (
        "You are a financial analyst. Read the quarterly reports of two companies and answer a question about "
        "them. Keep the answer concise and grounded in the reports. Write it as numbered clauses: each clause is "
        "one full sentence stating one fact-based financial insight. Do not use sub-bullets, headings or "
        "formatting symbols such as dashes, asterisks or bold text, and do not add explanations inside a clause.\n\n"
        f"An example of the format (made-up companies ABC and XYZ):\n{_ANSWER_EXAMPLE}\n\n"
        f"{_reports(doc)}\n\nQuestion: {doc['question']}\n\nAnswer:"
    )


def build_attribution_prompt(doc: dict, answer: str) -> str:
    """Post-hoc, step 2 (figure 4): the attributes of each clause of a given answer."""
    return (
        "You are given the quarterly reports of two companies, a question, an answer to it in numbered clauses "
        "and a list of professional knowledge. For each clause of the answer, give three attributes:\n"
        + _ATTRIBUTE_LINES.format(code=_POSTHOC_CODE)
        + "\nWrite the clause's number, then its three attribute lines; do not rewrite the clauses.\n\n"
        f"An example (for an answer of three clauses about made-up companies ABC and XYZ):\n{_ATTRIBUTES_EXAMPLE}\n"
        f"{_CODE_SLOT_NOTE}\n\n"
        f"{_reports(doc)}\n\nQuestion: {doc['question']}\n\nThe answer:\n{answer.strip()}\n\n{_knowledge(doc)}\n\n"
        "Attributes of each clause:\n"
    )


def build_feedback_prompt(doc: dict, analysis: str) -> str:
    """Iterative refinement, feedback (figure 6): review an analysis (with the execution
    results of its code); the reply is "Done" when nothing needs correcting."""
    return (
        "You are a financial analyst reviewing a colleague's analysis. It answers a question about two "
        "companies' quarterly reports in numbered clauses; each clause has Evidence (report paragraphs, or an "
        "inference from earlier clauses), Code (a Python function for a calculated number, shown with the result "
        "it gave when run) and Knowledge (entries of the professional-knowledge list).\n\n"
        "Review each clause for:\n"
        "1. Relevance and concision: does the analysis answer the question directly, without needless detail?\n"
        "2. Numerical accuracy: are the numbers calculated correctly from the reports, and is every calculation "
        "needed?\n"
        "3. Evidence: does each clause rest on the cited paragraphs, or on a sound inference, and stay within "
        "what the reports say? Are the cited knowledge entries the right ones, correctly applied?\n"
        "4. Code: is the code correct, did it run, and does its result agree with the number in the clause? If it "
        "failed, say how to fix it.\n\n"
        "Name the problems you find and say how to fix each. If nothing needs correcting, reply with the single "
        f"word {DONE} and nothing else.\n\n"
        f"{_reports(doc)}\n\nQuestion: {doc['question']}\n\n{_knowledge(doc)}\n\n"
        f"The analysis:\n{analysis.strip()}\n\nYour review:\n"
    )


def build_revision_prompt(doc: dict, analysis: str, feedback: str) -> str:
    """Iterative refinement, revision: the analysis again, improved as the feedback asks."""
    return (
        "You are a financial analyst. Below are the quarterly reports of two companies, a question, a list of "
        "professional knowledge, your analysis answering the question (with the results its code gave when run) "
        "and a reviewer's feedback on it. Rewrite the analysis so that it addresses the feedback. Keep the format: "
        "numbered clauses, one claim per clause, each with three attribute lines under it:\n"
        + _ATTRIBUTE_LINES.format(code=_E2E_CODE)
        + f"\n\nAn example of the format (made-up companies ABC and XYZ):\n{_FORMAT_EXAMPLE}\n{_CODE_SLOT_NOTE}\n\n"
        f"{_reports(doc)}\n\nQuestion: {doc['question']}\n\n{_knowledge(doc)}\n\n"
        f"Your analysis:\n{analysis.strip()}\n\nThe reviewer's feedback:\n{feedback.strip()}\n\n"
        "Write the whole revised analysis (without the execution results).\n\nRevised analysis:\n"
    )


def render_answer(clauses: Sequence[dict]) -> str:
    """Clauses (dicts with ``text``, ``evidence`` pairs, ``code`` snippets, ``knowledge``
    indices and optionally ``inferred_from`` clause numbers) in the answer format."""
    lines = []
    for number, clause in enumerate(clauses, start=1):
        by_company: dict[str, list[int]] = {}
        for company, index in clause["evidence"]:
            by_company.setdefault(company, []).append(index)
        evidence = "; ".join(f"{c} {sorted(set(i))}" for c, i in by_company.items())
        inferred = sorted(set(clause.get("inferred_from") or ()))
        if inferred:
            named = "inferred from clause" + ("s " if len(inferred) > 1 else " ") + ", ".join(map(str, inferred))
            evidence = f"{evidence}; {named}" if evidence else named
        lines.append(f"{number}. {clause['text']}")
        lines.append(f"Evidence: {evidence or 'none'}")
        if clause["code"]:
            lines.append("Code:")
            for snippet in clause["code"]:
                lines.append(f"```python\n{snippet.strip()}\n```")
        else:
            lines.append("Code: none")
        lines.append(f"Knowledge: {sorted(set(clause['knowledge']))}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- fitting

# Where paragraphs were left out, at the end of that company's excerpt.
CUT_MARK = "[... {count} more paragraphs of this excerpt left out to fit the model's context ...]"
# Room kept in an iterative prompt for the execution results shown with the analysis (each
# snippet's result is cut to 300 characters, about 100 tokens).
RESULTS_RESERVE_TOKENS = 512


@dataclasses.dataclass(frozen=True)
class FittedReports:
    reports: str
    dropped_paragraphs: int  # left out, over both companies
    prompt_tokens: int  # of the setting's first prompt, before fitting


def _longest(doc: dict, protocol: str, max_gen_toks: int) -> tuple[str, int]:
    """The longest prompt a setting sends for ``doc`` without the parts the model writes, and
    the tokens those parts may take: post-hoc, the attribution prompt holds the answer;
    iterative, the revision prompt holds the analysis (with its execution results) and the
    feedback; end-to-end, its one prompt."""
    if protocol == "fin_lfqa-posthoc":
        return build_attribution_prompt(doc, ""), max_gen_toks
    if protocol == "fin_lfqa-iterative":
        return build_revision_prompt(doc, "", ""), 2 * max_gen_toks + RESULTS_RESERVE_TOKENS
    return build_prompt(doc), 0


def first_prompt(doc: dict, protocol: str) -> str:
    return build_answer_prompt(doc) if protocol == "fin_lfqa-posthoc" else build_prompt(doc)


def fit_reports(doc: dict, fitter: PromptFitter, protocol: str = "") -> FittedReports:
    """``doc``'s report excerpts cut so that the setting's longest prompt, the parts the model
    will write into it (``max_gen_toks`` each) and the answer fit ``fitter``'s context.
    Paragraphs go from the end of the longer excerpt first, so both companies keep their
    opening paragraphs; a line at the end of a cut excerpt says how many went. A context too
    small for the prompt without any paragraph raises ``ValueError``."""
    blocks = split_reports(doc["reports"])
    before = fitter.prompt_tokens(first_prompt(doc, protocol))
    limit = fitter.max_length - fitter.max_gen_toks - PROMPT_MARGIN_TOKENS

    def fits(kept: Sequence[int]) -> tuple[int, int]:
        prompt, written = _longest(dict(doc, reports=_cut(blocks, kept)), protocol, fitter.max_gen_toks)
        return fitter.prompt_tokens(prompt) + written, written

    whole = [len(paragraphs) for _, paragraphs in blocks]
    tokens, written = fits(whole)
    if tokens <= limit:
        return FittedReports(doc["reports"], 0, before)
    bare, _ = fits([0] * len(blocks))
    room = limit - bare
    if room < 1:
        raise ValueError(
            f"max_length {fitter.max_length} cannot hold the prompt without its report excerpts plus "
            f"{fitter.max_gen_toks} answer tokens and {written} for what the model writes into later steps; "
            "raise max_length or lower max_gen_toks"
        )
    sizes = [[len(fitter.tokens(p)) + 1 for p in paragraphs] for _, paragraphs in blocks]
    kept = _keep_within(sizes, room)
    while any(kept) and fits(kept)[0] > limit:  # the estimate was short (tokens merge at the joins)
        kept = _drop_one(sizes, kept)
    return FittedReports(_cut(blocks, kept), sum(whole) - sum(kept), before)


def _keep_within(sizes: Sequence[Sequence[int]], room: int) -> list[int]:
    kept = [len(block) for block in sizes]
    while any(kept) and sum(sum(block[:n]) for block, n in zip(sizes, kept)) > room:
        kept = _drop_one(sizes, kept)
    return kept


def _drop_one(sizes: Sequence[Sequence[int]], kept: Sequence[int]) -> list[int]:
    """``kept`` less the last kept paragraph of the excerpt that keeps the most tokens."""
    longest = max(range(len(kept)), key=lambda i: sum(sizes[i][: kept[i]]))
    return [n - 1 if i == longest else n for i, n in enumerate(kept)]


def _cut(blocks: Sequence[tuple[str, Sequence[str]]], kept: Sequence[int]) -> str:
    return join_reports([
        (header, list(paragraphs[:n]) + ([CUT_MARK.format(count=len(paragraphs) - n)] if n < len(paragraphs) else []))
        for (header, paragraphs), n in zip(blocks, kept)
    ])
