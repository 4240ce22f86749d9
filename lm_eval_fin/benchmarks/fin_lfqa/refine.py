"""FinLFQA's two multi-step settings (paper section 5.1) as protocols of the ``fin-refine``
model wrapper (:mod:`lm_eval_fin.harness.multistep`).

Each protocol gets its documents, the model's first reply to each (to the task's prompt) and
``generate(documents, prompts)``, which asks the model one follow-up step for several
documents in one batch. It returns, per document, the final answer (what the task scores) and
a trace of the steps.

* :func:`posthoc`: the first reply is the answer alone (figure 3); one step asks for the
  attributes of its clauses (figure 4). The final answer is the first reply's clauses, each
  with the attributes given under its clause number (:func:`merge_attributes`).
* :func:`iterative`: the first reply is an end-to-end answer. Each round runs its code in the
  sandbox, shows the analysis with the execution results to the model for feedback (figure
  6), and, unless the model replies "Done", asks for the analysis revised as the feedback
  says. Rounds stop at "Done" or after ``max_rounds`` (the paper does not state its
  threshold: :data:`MAX_ROUNDS` is ours). The feedback comes from the model under test
  (self-feedback, the paper's Table 2) unless the ``feedback_model`` setting names another
  model, as a judge spec (the paper's Table 5: feedback from a stronger or a domain-tuned
  model); the revision is always the model under test's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from lm_eval_fin import attribution, sandbox
from lm_eval_fin.benchmarks.fin_lfqa import prompt
from lm_eval_fin.benchmarks.fin_lfqa.score import CODE_TIMEOUT_S
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.settings import RunSettings
from lm_eval_fin.text.replies import answer_part

logger = logging.getLogger(__name__)

Generate = Callable[[Sequence[int], Sequence[str]], list[str]]

MAX_ROUNDS = 3
RESULT_CHARS = 300  # of an execution result or error shown to the model

_NUMBERED = re.compile(r"^[ \t>*#-]*(?:\*\*)?\(?(?P<number>[0-9]{1,2})[.)](?:\*\*)?[ \t]+(?P<text>\S.*)$")
_DONE = re.compile(rf"\W*{prompt.DONE}\W*", re.IGNORECASE)


# ----------------------------------------------------------------------------------- post-hoc


def answer_clauses(answer: str) -> list[tuple[int | None, str]]:
    """The (number, text) of each clause of an answer written as numbered clauses (a clause
    runs on over the lines up to the next number); an answer without numbers is one clause,
    numbered None."""
    clauses: list[tuple[int | None, str]] = []
    number: int | None = None
    lines: list[str] = []
    for line in (answer or "").splitlines():
        numbered = _NUMBERED.match(line)
        if numbered:
            if lines:
                clauses.append((number, " ".join(lines)))
            number, lines = int(numbered["number"]), [numbered["text"].strip()]
        elif line.strip():
            lines.append(line.strip())
    if lines:
        clauses.append((number, " ".join(lines)))
    cleaned = [(n, re.sub(r"\*\*|__", "", text).strip()) for n, text in clauses]
    return [(n, text) for n, text in cleaned if text]


def _slots(numbers: Sequence[int | None], given: Sequence[int | None]) -> list[int] | None:
    """For each attributed clause of the second step, the position of the answer's clause it
    belongs to, by clause number; None when the numbers cannot be paired (the answer numbers
    no clause, or a number repeats, or an attributed clause has none), and the merge goes by
    position instead. A number the answer does not have goes to its last clause; an
    unnumbered lead-in of the answer gets nothing."""
    known = [n for n in numbers if n is not None]
    named = [n for n in given if n is not None]
    if not known or len(set(known)) != len(known) or len(named) != len(given) or len(set(named)) != len(named):
        return None
    where = {n: i for i, n in enumerate(numbers) if n is not None}
    return [where.get(n, len(numbers) - 1) for n in named]


def merge_attributes(answer: str, attributes: str, companies: Sequence[str]) -> tuple[str, bool]:
    """(the final post-hoc answer, whether the attributes could be read).

    The answer's clauses, each with the attributes the second step gave under the same clause
    number ("2." gets what the reply lists under "2.", whatever numbers either side skips);
    attributes under a number the answer does not have join its last clause, and clauses
    without attributes get none. Where either side does not number each clause once, the
    merge goes by position (the n-th attributed clause to the n-th clause). "Inferred from
    clause N" is renumbered with the clauses. When the second step has no readable attribute
    at all, the answer is returned as it is: scored, like an end-to-end answer without
    attributes, as a parse failure (its text still counts for the text metrics)."""
    parsed = attribution.parse_answer(attributes, companies)
    numbered = answer_clauses(answer)
    if parsed.parse_failure or not numbered:
        return answer, False
    numbers = [n for n, _ in numbered]
    slots = _slots(numbers, [c.number for c in parsed.clauses])
    by_number = slots is not None
    if slots is None:
        slots = [min(i, len(numbered) - 1) for i in range(len(parsed.clauses))]
    renumber = {n: i + 1 for i, n in enumerate(numbers) if n is not None} if by_number else {}
    merged: list[dict[str, Any]] = [
        {"text": text, "evidence": [], "code": [], "knowledge": [], "inferred_from": []} for _, text in numbered
    ]
    for slot, clause in zip(slots, parsed.clauses):
        merged[slot]["evidence"] += clause.evidence
        merged[slot]["code"] += clause.code
        merged[slot]["knowledge"] += clause.knowledge
        merged[slot]["inferred_from"] += [renumber.get(n, n) for n in clause.inferred_from]
    return prompt.render_answer(merged), True


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


def external_feedback(spec: str, settings: RunSettings) -> Generate:
    """Feedback from the model ``spec`` names (a judge spec: ``vllm:``, ``openai:``, ``hf:``),
    asked through the judge layer (batched, cached, with the run's judge options) with the
    answer budget of the model under test. A request it failed gives an empty reply, which
    the protocol records as a failed feedback step."""
    from lm_eval_fin.judge import JudgeRequest, load_judge

    judge = load_judge(spec, settings.options())
    assert judge is not None, "a feedback model was named"
    max_tokens = settings.values.get("max_gen_toks") or taskfiles.max_gen_toks(settings.task)

    def generate(which: Sequence[int], prompts: Sequence[str]) -> list[str]:
        requests = [JudgeRequest(messages=({"role": "user", "content": p},), max_tokens=max_tokens) for p in prompts]
        replies = judge.complete(requests, desc="feedback") if requests else []
        for reply in replies:
            if reply.text is None:
                logger.warning("FinLFQA iterative refinement: the feedback model %s failed a request (%s)", spec,
                               reply.error)
        return [reply.text or "" for reply in replies]

    return generate


def _settings(docs: Sequence[dict]) -> RunSettings | None:
    settings = docs[0].get("settings") if docs else None
    return RunSettings.from_json(settings) if isinstance(settings, str) else None


def iterative(docs: Sequence[dict], answers: Sequence[str], generate: Generate) -> list[tuple[str, dict]]:
    """Iterative refinement: rounds of execution, feedback and revision, each one batch over
    the documents still being refined, until "Done" or ``max_rounds``. The feedback comes
    from ``generate`` (the model under test) or, where the run names a ``feedback_model``,
    from that model; an empty feedback reply (a failed request) ends that document's
    refinement, recorded in its trace (``feedback_failed``)."""
    max_rounds = _max_rounds(docs)
    settings = _settings(docs)
    feedback_spec = settings.values.get("feedback_model") if settings else None
    give_feedback = external_feedback(feedback_spec, settings) if feedback_spec and settings else generate
    current = list(answers)
    traces: list[dict[str, Any]] = [
        {"setting": "iterative", "max_rounds": max_rounds, "rounds": 0, "done": False,
         "feedback_model": feedback_spec or "self", "steps": [{"step": "answer", "reply": answer}]}
        for answer in answers
    ]
    active = list(range(len(docs)))
    for _ in range(max_rounds):
        if not active:
            break
        results = run_snippets([current[i] for i in active], [docs[i]["companies"] for i in active])
        analyses = {i: with_results(current[i], r) for i, r in zip(active, results)}
        replies = give_feedback(active, [prompt.build_feedback_prompt(docs[i], analyses[i]) for i in active])
        # a reply enters here: its answer part is the feedback (a reasoning model's thinking is
        # none); the trace keeps the raw reply
        feedback = [answer_part(reply) for reply in replies]
        revise = []
        for i, raw, reply, executed in zip(active, replies, feedback, results):
            trace = traces[i]
            trace["rounds"] += 1
            trace["steps"].append({"step": "feedback", "executions": [text for _, text in executed], "reply": raw})
            if is_done(reply):
                trace["done"] = True
            elif not reply.strip():
                trace["feedback_failed"] = True  # nothing to revise by: keep the analysis as it is
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
    settings = _settings(docs)
    return int(settings.values.get("max_rounds", MAX_ROUNDS)) if settings else MAX_ROUNDS


PROTOCOLS = {"fin_lfqa-posthoc": posthoc, "fin_lfqa-iterative": iterative}
