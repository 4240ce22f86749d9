"""lm-eval's filter stage for our tasks: one batched pass over every answer of a task.

lm-eval runs a task's filters once generation is over, on every response and document of the
task at once, and hands each document's filtered response to ``process_results``. Our tasks
name one filter in their YAML::

    filter_list:
      - name: none
        filter:
          - function: custom
            filter_fn: !function utils.score_answers

``score_answers`` (:func:`filter_function`) takes each document's first response (as lm-eval's
default filter does), reads it as the parsers will (:func:`~lm_eval_fin.text.cleantext.read_answer`)
and keeps its answer part (:func:`~lm_eval_fin.text.replies.answer_part`: a reasoning model's
``<think>`` block is stripped here, once, and no parser or metric sees it; lm-eval keeps the
raw output in the sample's ``resps``) and runs the benchmark's batched work over all of them: judge rounds, BERTScore, the code
sandbox, each once per task. Its outcome for a document is the scored-answer record of
:mod:`lm_eval_fin.outputs.records`, which lm-eval logs as the sample's filtered response and passes to
``process_results``; ``process_results`` turns it into plain numbers. The filter keeps
lm-eval's default name, ``none``, so results keys read as they do for any lm-eval task
(``"rouge_l_f1,none"``).

``--predict_only`` runs the filters too: then nothing is judged, run or scored, and the record
holds the answer (and what a benchmark keeps without scoring, such as the steps of a
multi-step setting); ``lm-eval-fin score`` scores it later through this same stage.

Judges are loaded once per spec and options for the life of the process (:func:`judge_for`: a
local model loads once for every task) and closed when it ends. After generation nothing may
raise: a judge that cannot be set up, or whose backend fails half way, leaves the judged values
of the task undefined (:class:`JudgeUnavailable`), never the generations lost. Documents a
judge failed or could not read are recorded (:func:`record_judge_failures`) so that
``lm-eval-fin run`` exits with status 1 once lm-eval has written its files.

A judged benchmark hands its judge work to :func:`judge_stage` (a :class:`JudgeWork`: how to
judge every document at once, and what a document's record says when the judge cannot be
used or none is configured); the stage does the rest for every benchmark alike: no judge,
an unavailable judge, the failures counted and recorded, the judge work of each document in
its record (``records.JUDGE_USAGE``).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from lm_eval_fin.harness.settings import RunSettings
from lm_eval_fin.judge import JudgeCacheError, JudgeConfigError
from lm_eval_fin.judge.base import failure_phrase
from lm_eval_fin.measures.degenerate import degenerate_kind
from lm_eval_fin.outputs import records
from lm_eval_fin.text.cleantext import one_line, read_answer
from lm_eval_fin.text.replies import answer_part

logger = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")
PREDICT_ONLY_ENV = "LM_EVAL_FIN_PREDICT_ONLY"

# score(answers, docs, settings) -> one dict of details per document (the record's keys)
BatchScore = Callable[[Sequence[str], Sequence[dict], RunSettings], list[dict[str, Any]]]
# keep(docs) -> one dict per document: what a --predict_only record holds beside the answer
Keep = Callable[[Sequence[dict]], list[dict[str, Any]]]


def first_response(responses: Any) -> Any:
    """A document's first response (lm-eval's ``take_first``): a list of repeats, or one."""
    return responses[0] if isinstance(responses, (list, tuple)) and responses else responses


def lm_eval_argv(argv: Sequence[str] | None = None) -> list[str] | None:
    """The arguments of lm-eval's command line when this process is it (``lm_eval``,
    ``lm-eval``, ``python -m lm_eval`` or ``lm-eval-fin run``, which calls lm-eval's CLI with its
    own argv); None for any other process (Python's API, a test), whose options mean something else."""
    argv = list(sys.argv if argv is None else argv)
    program = Path(argv[0]) if argv else Path()
    # ``python -m lm_eval`` runs lm_eval/__main__.py
    if program.name not in ("lm_eval", "lm-eval") and program.parts[-2:] != ("lm_eval", "__main__.py"):
        return None
    return argv[1:]


def predict_only(argv: Sequence[str] | None = None) -> bool:
    """Whether this process runs lm-eval with ``--predict_only`` (metrics not computed):
    ``$LM_EVAL_FIN_PREDICT_ONLY``, else lm-eval's command line (:func:`lm_eval_argv`).
    From Python, call ``simple_evaluate(predict_only=True)`` with the variable set."""
    value = os.environ.get(PREDICT_ONLY_ENV)
    if value is not None:
        return value.strip().lower() not in ("", "0", "false", "no")
    arguments = lm_eval_argv(argv)
    return arguments is not None and any(
        arg in ("--predict_only", "-x") or arg.startswith("--predict_only=") for arg in arguments)


def command_line_model(argv: Sequence[str] | None = None) -> str | None:
    """The model lm-eval's command line names (``--model``/``-M``; lm-eval's default ``hf``
    when left out); None when this process is not lm-eval's command line, or when a
    ``--config`` file may name the model instead."""
    arguments = lm_eval_argv(argv)
    if arguments is None:
        return None
    for i, arg in enumerate(arguments):
        name, equals, value = arg.partition("=")
        if name in ("--model", "-M"):
            return value if equals else (arguments[i + 1] if i + 1 < len(arguments) else None)
    if any(arg.partition("=")[0] in ("--config", "-C") for arg in arguments):
        return None
    return "hf"


def filter_function(
    score: BatchScore, keep: Keep | None = None, prompt: Callable[[dict], str] | None = None
) -> Callable[[Sequence, Sequence], list[str]]:
    """The ``filter_fn`` of a task's ``custom`` filter: every document's scored-answer record,
    with why the answer is degenerate (:mod:`lm_eval_fin.measures.degenerate`; None when it is not)
    where ``prompt`` gives the document's prompt and ``score`` did not say already."""

    def score_answers(resps: Sequence, docs: Sequence) -> list[str]:
        docs = list(docs)
        read = [read_answer(first_response(responses)) for responses in resps]
        answers = [answer_part(text) for text, _ in read]
        cuts = [{"truncated_answer": cut} for _, cut in read]
        if not docs:
            return []
        if predict_only():
            kept = keep(docs) if keep else [{} for _ in docs]
            return [records.encode(answer, {**cut, **more}) for answer, cut, more in zip(answers, cuts, kept)]
        settings = RunSettings.from_json(docs[0]["settings"])
        details = score(answers, docs, settings)
        if len(details) != len(docs):  # a benchmark's bug; lm-eval would pair records with the wrong documents
            raise RuntimeError(f"{settings.task}: the filter stage returned {len(details)} records for {len(docs)} documents")
        if prompt is not None:
            for detail, answer, doc in zip(details, answers, docs):
                if "degenerate" not in detail:
                    detail["degenerate"] = degenerate_kind(answer, prompt(doc))
        return [records.encode(answer, {**cut, **detail}) for answer, cut, detail in zip(answers, cuts, details)]

    return score_answers


# --------------------------------------------------------------------------- the judge pool

_JUDGES: dict[tuple[str, str], Any] = {}


def judge_for(settings: RunSettings) -> Any:
    """The judge of ``settings`` (None for no judge), loaded once per spec and options."""
    if settings.judge is None:
        return None
    from lm_eval_fin.judge import load_judge

    key = (settings.judge, json.dumps(dict(settings.judge_options), sort_keys=True))
    if key not in _JUDGES:
        _JUDGES[key] = load_judge(settings.judge, settings.options())
    return _JUDGES[key]


@atexit.register
def close_judges() -> None:
    """Free every judge of the process (a vLLM engine holds its GPU until closed)."""
    while _JUDGES:
        _, judge = _JUDGES.popitem()
        try:
            judge.close()
        except Exception as exc:  # noqa: BLE001 - closing must never mask the run's outcome
            logger.debug("closing judge %s: %r", getattr(judge, "spec", judge), exc)


class JudgeUnavailable(Exception):
    """The task's judge could not be set up, or its backend raised half way: every judged
    value of the task is undefined and every document counts as a judge failure."""


def run_with_judge(settings: RunSettings, work: Callable[[Any], R]) -> R:
    """``work(judge)`` with the task's judge (None when none is configured). After generation
    nothing may raise but this: a judge that cannot be set up or whose backend raises becomes
    :class:`JudgeUnavailable`, with a warning that says how to score the answers later."""
    try:
        judge = judge_for(settings)
    except Exception as exc:  # noqa: BLE001 - a setup problem must not discard the generations
        logger.warning(
            "%s: the judge %s cannot be set up (%s); its values are left undefined. Score the logged samples "
            "with `lm-eval-fin score <output dir> --judge <spec>`.", settings.task, settings.judge, exc,
        )
        raise JudgeUnavailable(f"judge setup: {one_line(exc, 600)}") from exc
    try:
        return work(judge)
    except (JudgeConfigError, JudgeCacheError) as exc:  # its message is the whole story: no traceback
        logger.warning(
            "%s: %s; the judged values are left undefined. Once that is fixed, score the logged samples with "
            "`lm-eval-fin score <output dir>`.", settings.task, one_line(exc, 600),
        )
        raise JudgeUnavailable(one_line(exc, 600)) from exc
    except Exception as exc:  # noqa: BLE001 - a backend failing for good must not discard the generations
        logger.exception(
            "%s: judge %s failed; its values are left undefined. Score the logged samples with `lm-eval-fin score`.",
            settings.task, settings.judge,
        )
        raise JudgeUnavailable(f"{type(exc).__name__}: {one_line(exc, 600)}") from exc


# ------------------------------------------------------------------------ failures of a run


@dataclass(frozen=True)
class JudgeFailures:
    task: str
    failed: int  # documents whose judge requests failed for good (transport, HTTP, timeout)
    unparsed: int  # documents whose judge answers stayed unreadable
    documents: int
    first_error: str | None


FAILURES: list[JudgeFailures] = []


def record_judge_failures(task: str, failed: int, unparsed: int, documents: int, first_error: str | None) -> None:
    """Warn about a task's judge failures and remember them for the exit status of
    ``lm-eval-fin run`` and ``score``."""
    if not (failed or unparsed):
        return
    FAILURES.append(JudgeFailures(task, failed, unparsed, documents, first_error))
    logger.warning(
        "%s: %s; their judged values are left undefined. Run again to resume from the judge cache, or score the "
        "logged samples with `lm-eval-fin score <output dir> --judge <spec>`.",
        task, failure_phrase(failed, unparsed, documents, first_error),
    )


# ------------------------------------------------------------------------- the judge stage


@dataclass(frozen=True)
class Judged:
    """One document's outcome of a benchmark's judge work: its record's keys, whether the judge
    failed on it for good (``error`` says why) or answered unreadably, and the judge work it
    cost (``records.JUDGE_USAGE``; None where no judge was asked)."""

    details: dict[str, Any]
    failed: bool = False
    unparsed: bool = False
    error: str | None = None
    usage: dict[str, int] | None = None


@dataclass(frozen=True)
class JudgeWork(Generic[T]):
    """What a judged benchmark gives the judge stage, over its own items (one per document).

    ``run(judge, items)``: one :class:`Judged` per item, every item judged in one batch (the
    benchmark's judge prompts and reply parsers live there). ``unavailable(items, error)``: each
    item's record keys when the judge cannot be used. ``unjudged(items)``: each item's record
    keys when no judge is configured; None where ``run`` works without one (``judge`` None)."""

    run: Callable[[Any, Sequence[T]], Sequence[Judged]]
    unavailable: Callable[[Sequence[T], str], list[dict[str, Any]]]
    unjudged: Callable[[Sequence[T]], list[dict[str, Any]]] | None = None


def judge_stage(settings: RunSettings, items: Sequence[T], work: JudgeWork[T]) -> list[dict[str, Any]]:
    """Every item's record keys from the task's judge (:func:`run_with_judge`): a judge that
    cannot be used counts every document as failed; no judge configured says so once (or runs
    the work without one); a judge's failures on documents are recorded for the exit status.
    Where the work ran, each record holds the judge work its document cost."""
    count = len(items)
    unjudged = work.unjudged
    try:
        judged = run_with_judge(
            settings, lambda judge: None if judge is None and unjudged is not None else list(work.run(judge, items))
        )
    except JudgeUnavailable as exc:
        record_judge_failures(settings.task, count, 0, count, str(exc))
        return work.unavailable(items, str(exc))
    if judged is None:
        assert unjudged is not None
        logger.warning(
            "%s: no judge configured ($LM_EVAL_FIN_JUDGE or --metadata '{\"judge\": ...}'); the judge's "
            "metrics are undefined. Score later with `lm-eval-fin score <output dir> --judge "
            "<spec>`.", settings.task,
        )
        return unjudged(items)
    if len(judged) != count:  # a benchmark's bug; records would land on the wrong documents
        raise RuntimeError(f"{settings.task}: the judge work returned {len(judged)} results for {count} documents")
    if settings.judge is not None:
        record_judge_failures(
            settings.task, sum(j.failed for j in judged), sum(j.unparsed for j in judged), count,
            next((j.error for j in judged if j.failed), None),
        )
    return [{**j.details, records.JUDGE_USAGE: j.usage} for j in judged]
