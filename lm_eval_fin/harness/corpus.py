"""Corpus-level metrics under lm-eval: one memoised pass over the run, one judge per spec.

lm-eval aggregates each metric on its own: it calls the metric's aggregation function with
the list of values ``process_results`` returned for it, one per document. A corpus metric
(BERTScore of the run, code execution rate over every snippet, anything a judge scores in
one batch) wants all documents at once and computes many figures in one pass. So:

* ``process_results`` returns, under every corpus metric, a :class:`CorpusItem` holding what
  the pass needs of that document (:meth:`CorpusMetrics.items`);
* every corpus metric names the one aggregation :func:`corpus_metric` in its YAML;
* the first call runs the benchmark's pass over all items and memoises its figures, keyed by
  the benchmark and the items; the other calls read the memo.

lm-eval writes each value of ``process_results`` into ``--log_samples``; a CorpusItem prints
as one short line there instead of repeating the document for every metric.

Judges are loaded once per spec and options for the life of the process (:func:`judge_for`,
a local model loads once for every task and metric) and closed when it ends. Requests a judge
failed are recorded (:func:`record_judge_failures`) so that ``lm-eval-fin run`` can exit
non-zero after lm-eval has written its results.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lm_eval_fin.cleantext import one_line
from lm_eval_fin.harness.settings import RunSettings
from lm_eval_fin.judge import JudgeCacheError, JudgeConfigError, failure_phrase

logger = logging.getLogger(__name__)

MEMO_SIZE = 8
R = TypeVar("R")


@dataclass(frozen=True, repr=False)
class CorpusItem:
    """What a corpus pass needs of one document, under the name of one corpus metric."""

    metric: str
    benchmark: str
    doc_id: str
    settings: str  # RunSettings.to_json(): the same for every document of a run
    data: Mapping[str, Any]

    @property
    def key(self) -> str:
        blob = json.dumps([self.doc_id, self.settings, self.data], sort_keys=True, default=str)
        return hashlib.sha1(blob.encode("utf-8", "replace")).hexdigest()

    def __str__(self) -> str:
        return f"corpus-level {self.metric} (doc {self.doc_id})"

    __repr__ = __str__


Pass = Callable[[Sequence[CorpusItem], RunSettings], Mapping[str, float]]
_PASSES: dict[str, Pass] = {}
_MEMO: collections.OrderedDict[tuple, Mapping[str, float]] = collections.OrderedDict()


@dataclass(frozen=True)
class CorpusMetrics:
    """The corpus metrics of one benchmark and the pass that computes them all."""

    benchmark: str
    metrics: tuple[str, ...]
    compute: Pass

    def __post_init__(self) -> None:
        _PASSES[self.benchmark] = self.compute

    def items(self, doc: Mapping[str, Any], data: Mapping[str, Any], metrics: Sequence[str] | None = None):
        """``{metric: CorpusItem}`` for ``process_results`` (``metrics``: a subset, else all)."""
        return {
            name: CorpusItem(name, self.benchmark, str(doc["id"]), doc["settings"], data)
            for name in (self.metrics if metrics is None else metrics)
        }


def run_key(items: Sequence[CorpusItem]) -> str:
    """A hash naming a run's items (its documents, answers and settings)."""
    return hashlib.sha256("".join(item.key for item in items).encode()).hexdigest()


def corpus_metric(items: Sequence[CorpusItem]) -> float:
    """The aggregation of every corpus metric: the memoised pass's figure for this metric."""
    if not items:
        return math.nan
    first = items[0]
    key = (first.benchmark, tuple(item.key for item in items))
    if key not in _MEMO:
        _MEMO[key] = _PASSES[first.benchmark](items, RunSettings.from_json(first.settings))
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return float(_MEMO[key].get(first.metric, math.nan))


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
    """The run's judge could not be set up, or its backend raised half way: every judged
    metric of the run is NaN and counted as a judge failure."""


def run_with_judge(settings: RunSettings, work: Callable[[Any], R]) -> R:
    """``work(judge)`` with the run's judge (None when none is configured). At aggregation
    time, after generation, nothing may raise but this: a judge that cannot be set up or whose
    backend raises becomes :class:`JudgeUnavailable`, with a warning that says how to re-score."""
    try:
        judge = judge_for(settings)
    except Exception as exc:  # noqa: BLE001 - a setup problem must not discard the generations
        logger.warning(
            "%s: the judge %s cannot be set up (%s); its metrics are NaN. Re-score the logged samples "
            "with `lm-eval-fin score <output dir> --judge <spec>`.", settings.task, settings.judge, exc,
        )
        raise JudgeUnavailable(f"judge setup: {exc}") from exc
    try:
        return work(judge)
    except (JudgeConfigError, JudgeCacheError) as exc:  # its message is the whole story: no traceback
        logger.warning(
            "%s: %s; the judged metrics are NaN. Once that is fixed, re-score the logged samples with "
            "`lm-eval-fin score <output dir>`.", settings.task, one_line(exc, 600),
        )
        raise JudgeUnavailable(one_line(exc, 600)) from exc
    except Exception as exc:  # noqa: BLE001 - a backend failing for good must not discard the generations
        logger.exception(
            "%s: judge %s failed; its metrics are NaN. Re-score the logged samples with `lm-eval-fin score`.",
            settings.task, settings.judge,
        )
        raise JudgeUnavailable(f"{type(exc).__name__}: {exc}") from exc


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
    ``lm-eval-fin run``."""
    if not (failed or unparsed):
        return
    FAILURES.append(JudgeFailures(task, failed, unparsed, documents, first_error))
    logger.warning(
        "%s: %s; their judged metrics are left out. Run again to resume from the judge cache, or re-score the "
        "logged samples with `lm-eval-fin score <output dir> --judge <spec>`.",
        task, failure_phrase(failed, unparsed, documents, first_error),
    )
