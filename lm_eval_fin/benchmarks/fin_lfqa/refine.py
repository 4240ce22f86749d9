"""FinLFQA's two multi-step settings (paper section 5.1) as protocols of the ``fin-refine``
model wrapper (:mod:`lm_eval_fin.harness.multistep`).

Each protocol gets its documents, the model's first reply to each (to the task's prompt) and
``generate(documents, prompts)``, which asks the model one follow-up step for several
documents in one batch. It returns, per document, the final answer (what the task scores) and
a trace of the steps.

* :func:`posthoc`: the first reply is the answer alone (figure 3); one step asks for the
  attributes of its clauses (figure 4). The final answer is the first reply's clauses, each
  with the attributes given for its number (:func:`merge_attributes`).
* :func:`iterative`: the first reply is an end-to-end answer. Each round runs its code in the
  sandbox, shows the analysis with the execution results to the model for feedback (figure
  6), and, unless the model replies "Done", asks for the analysis revised as the feedback
  says. Rounds stop at "Done" or after ``max_rounds`` (the paper does not state its
  threshold: :data:`MAX_ROUNDS` is ours).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from lm_eval_fin import attribution, sandbox
from lm_eval_fin.benchmarks.fin_lfqa import prompt
from lm_eval_fin.benchmarks.fin_lfqa.score import CODE_TIMEOUT_S
from lm_eval_fin.harness.settings import RunSettings

logger = logging.getLogger(__name__)

Generate = Callable[[Sequence[int], Sequence[str]], list[str]]

MAX_ROUNDS = 3
RESULT_CHARS = 300  # of an execution result or error shown to the model

_NUMBERED = re.compile(r"^[ \t>*#-]*(?:\*\*)?\(?(?P<number>[0-9]{1,2})[.)](?:\*\*)?[ \t]+(?P<text>\S.*)$")
_DONE = re.compile(rf"\W*{prompt.DONE}\W*", re.IGNORECASE)


# ----------------------------------------------------------------------------------- post-hoc


def answer_clauses(answer: str) -> list[str]:
    """The clause texts of an answer written as numbered clauses (a clause runs on over the
    lines up to the next number); an answer without numbers is one clause."""
    clauses: list[str] = []
    lines: list[str] = []
    for line in (answer or "").splitlines():
        numbered = _NUMBERED.match(line)
        if numbered:
            if lines:
                clauses.append(" ".join(lines))
            lines = [numbered["text"].strip()]
        elif line.strip():
            lines.append(line.strip())
    if lines:
        clauses.append(" ".join(lines))
    return [re.sub(r"\*\*|__", "", clause).strip() for clause in clauses if clause.strip()]


def merge_attributes(answer: str, attributes: str, companies: Sequence[str]) -> tuple[str, bool]:
    """(the final post-hoc answer, whether the attributes could be read).

    The answer's clauses, in order, each with the attributes the second step gave under the
    same position; attributes of further clauses join the last clause, and clauses without
    attributes get none. When the second step has no readable attribute at all, the answer
    is returned as it is: scored, like an end-to-end answer without attributes, as a parse
    failure (its text still counts for the text metrics)."""
    parsed = attribution.parse_answer(attributes, companies)
    texts = answer_clauses(answer)
    if parsed.parse_failure or not texts:
        return answer, False
    given: list[dict[str, list[Any]]] = [
        {"evidence": list(c.evidence), "code": list(c.code), "knowledge": list(c.knowledge),
         "inferred_from": list(c.inferred_from)}
        for c in parsed.clauses
    ]
    for extra in given[len(texts):]:
        for key, values in extra.items():
            given[len(texts) - 1][key] += values
    empty: dict[str, list[Any]] = {"evidence": [], "code": [], "knowledge": [], "inferred_from": []}
    clauses = [{"text": text, **(given[i] if i < len(given) else empty)} for i, text in enumerate(texts)]
    return prompt.render_answer(clauses), True


def posthoc(docs: Sequence[dict], answers: Sequence[str], generate: Generate) -> list[tuple[str, dict]]:
    """The post-hoc setting: attribute each answer in a second step (one batch)."""
    positions = list(range(len(docs)))
    attributes = generate(positions, [prompt.build_attribution_prompt(d, a) for d, a in zip(docs, answers)])
    outcomes = []
    for doc, answer, given in zip(docs, answers, attributes):
        final, readable = merge_attributes(answer, given, doc["companies"])
        outcomes.append((final, {
            "setting": "posthoc",
            "steps": [{"step": "answer", "reply": answer}, {"step": "attribution", "reply": given}],
            "attributes_read": readable,
        }))
    return outcomes


# -------------------------------------------------------------------------- iterative refinement


def describe_result(result: sandbox.ExecResult) -> str:
    if result.ok:
        return f"returned {_cut(result.value or '')}"
    category = getattr(result, "category", None)
    return f"failed{f' ({category})' if category else ''}: {_cut(result.error or 'no result')}"


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 3] + "..."


def run_snippets(answers: Sequence[str], companies: Sequence[Sequence[str]]) -> list[list[tuple[int, str]]]:
    """Per answer, (clause number, what its code gave when run) for each snippet, all answers'
    snippets run in one parallel pass of the sandbox. A sandbox that cannot be set up here
    says so in every result (the refinement goes on; the code metric reports it as NaN)."""
    per_answer: list[list[tuple[int, str]]] = []
    for answer, names in zip(answers, companies):
        parsed = attribution.parse_answer(answer, names)
        per_answer.append([(n, code) for n, clause in enumerate(parsed.clauses, start=1) for code in clause.code])
    snippets = [code for snippets in per_answer for _, code in snippets]
    try:
        results = [describe_result(r) for r in sandbox.run_codes(snippets, timeout=CODE_TIMEOUT_S)] if snippets else []
    except sandbox.SandboxError as exc:
        logger.warning("FinLFQA iterative refinement: the code sandbox cannot be set up (%s)", exc)
        results = [f"not run: the sandbox cannot be set up here ({_cut(str(exc))})"] * len(snippets)
    described: list[list[tuple[int, str]]] = []
    start = 0
    for numbered in per_answer:
        described.append([(n, text) for (n, _), text in zip(numbered, results[start: start + len(numbered)])])
        start += len(numbered)
    return described


def with_results(answer: str, results: Sequence[tuple[int, str]]) -> str:
    """The analysis as the reviewer sees it: the answer, then what each snippet gave."""
    if not results:
        return answer.strip() + "\n\nExecution results: the analysis has no code."
    lines = [f"- code {i} (clause {clause}): {text}" for i, (clause, text) in enumerate(results, start=1)]
    return answer.strip() + "\n\nExecution results of its code, in order:\n" + "\n".join(lines)


def is_done(feedback: str) -> bool:
    """Whether the reviewer said there is nothing to correct: "Done" and nothing else."""
    return bool(_DONE.fullmatch(feedback or ""))


def iterative(docs: Sequence[dict], answers: Sequence[str], generate: Generate) -> list[tuple[str, dict]]:
    """Iterative refinement: rounds of execution, feedback and revision, each one batch over
    the documents still being refined, until "Done" or ``max_rounds``."""
    max_rounds = _max_rounds(docs)
    current = list(answers)
    traces: list[dict[str, Any]] = [
        {"setting": "iterative", "max_rounds": max_rounds, "rounds": 0, "done": False,
         "steps": [{"step": "answer", "reply": answer}]}
        for answer in answers
    ]
    active = list(range(len(docs)))
    for _ in range(max_rounds):
        if not active:
            break
        results = run_snippets([current[i] for i in active], [docs[i]["companies"] for i in active])
        analyses = {i: with_results(current[i], r) for i, r in zip(active, results)}
        feedback = generate(active, [prompt.build_feedback_prompt(docs[i], analyses[i]) for i in active])
        revise = []
        for i, reply, executed in zip(active, feedback, results):
            trace = traces[i]
            trace["rounds"] += 1
            trace["steps"].append({"step": "feedback", "executions": [text for _, text in executed], "reply": reply})
            if is_done(reply):
                trace["done"] = True
            else:
                revise.append(i)
        revised = generate(revise, [prompt.build_revision_prompt(docs[i], analyses[i], feedback[active.index(i)])
                                    for i in revise])
        for i, text in zip(revise, revised):
            traces[i]["steps"].append({"step": "revision", "reply": text})
            if text.strip():  # an empty revision would erase the analysis: keep the last one
                current[i] = text
        active = revise
    return [(text, trace) for text, trace in zip(current, traces)]


def _max_rounds(docs: Sequence[dict]) -> int:
    settings = docs[0].get("settings") if docs else None
    if isinstance(settings, str):
        return int(RunSettings.from_json(settings).values.get("max_rounds", MAX_ROUNDS))
    return MAX_ROUNDS


PROTOCOLS = {"fin_lfqa-posthoc": posthoc, "fin_lfqa-iterative": iterative}
