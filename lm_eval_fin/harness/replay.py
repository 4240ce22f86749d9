"""Logged answers replayed through lm-eval: how ``lm-eval-fin score`` scores a run.

``lm-eval-fin score OUT --judge SPEC`` (:mod:`lm_eval_fin.harness.rescore`) runs lm-eval itself
once per logged run, with the model ``fin-replay`` and the run's tasks. Each task's loader
takes its documents from the run's samples file instead of reading data (the documents as
they were logged, so a transcript fitted to the model's context stays as it was), with the
settings they were run with and the scoring judge (the run's judge options, under those
``score`` is given); ``fin-replay`` answers each request with the logged answer of its
document. The rest is a normal lm-eval run: the filter stage scores the
answers (:mod:`lm_eval_fin.harness.stage`), ``process_results`` gives the per-sample values,
lm-eval aggregates them and writes ``results_<date>.json`` and ``samples_<task>_<date>.jsonl``
(with a new date) beside the run's own files. One difference: the prompts of the scored
samples are written without the chat template (``fin-replay`` has no tokenizer); the answers,
documents and settings are the logged ones.

``score`` describes the replay in a JSON file named by ``$LM_EVAL_FIN_REPLAY``
(:class:`Plan`): the samples file of each task, the judge spec and its options.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.harness.settings import RunSettings
from lm_eval_fin.outputs import records, runfiles
from lm_eval_fin.plumbing import atomic

REPLAY_ENV = "LM_EVAL_FIN_REPLAY"
MODEL_NAME = runfiles.REPLAY_MODEL


class ReplayError(RuntimeError):
    """Logged samples that cannot be replayed; the message names the file and the document."""


@dataclass(frozen=True)
class Plan:
    """What ``score`` replays: task -> its samples file, and the judge that scores them
    (``judge`` None: no judge)."""

    tasks: Mapping[str, str]
    judge: str | None
    judge_options: Mapping[str, Any]

    def write(self, path: Path) -> None:
        atomic.write_text(path, json.dumps(dataclasses.asdict(self), sort_keys=True))


def plan() -> Plan | None:
    """The replay of this process (``$LM_EVAL_FIN_REPLAY``), or None."""
    path = os.environ.get(REPLAY_ENV)
    if not path:
        return None
    return _read_plan(path)


@functools.lru_cache(maxsize=4)
def _read_plan(path: str) -> Plan:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Plan(dict(data["tasks"]), data["judge"], dict(data["judge_options"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReplayError(f"${REPLAY_ENV}={path}: not a replay plan ({exc})") from None


@functools.lru_cache(maxsize=16)
def _samples(path: str) -> tuple[dict, ...]:
    """The logged samples of one file, in lm-eval's document order."""
    samples = runfiles.read_samples(Path(path))
    return tuple(sorted(samples, key=_doc_id))


def _doc_id(sample: dict) -> int:
    doc_id = sample.get("doc_id")
    return doc_id if isinstance(doc_id, int) else 0


def check_samples(path: str | Path) -> tuple[dict, ...]:
    """The logged samples of one file, each checked to carry the settings its run had
    (:class:`ReplayError` naming the file and document otherwise)."""
    samples = _samples(str(path))
    for sample in samples:
        doc = sample["doc"]
        if not isinstance(doc, dict) or not isinstance(doc.get("settings"), str):
            raise ReplayError(
                f"{path}: document {sample.get('doc_id')} carries no settings: "
                "not a sample of an lm-eval-fin task (or logged by an older version)"
            )
    return samples


def logged_documents(task: str) -> tuple[list[dict], RunSettings] | None:
    """The documents of ``task`` as they were logged (without their settings) and the settings
    to score them with (the logged ones, with the plan's judge); None unless this process
    replays ``task``."""
    current = plan()
    if current is None or task not in current.tasks:
        return None
    samples = check_samples(current.tasks[task])
    docs = [{key: value for key, value in sample["doc"].items() if key != "settings"} for sample in samples]
    logged = RunSettings.from_json(samples[0]["doc"]["settings"])
    # the run's judge options (a judge_max_tokens in its metadata) stand where score names none:
    # the same requests as the run's, so what its judge answered comes from the cache
    options = {**logged.judge_options, **current.judge_options}
    settings = dataclasses.replace(logged, judge=current.judge, judge_options=options)
    return docs, settings


def logged_answer(task: str, doc: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the raw answer, the scored-answer record) logged for the document of ``task`` with the
    id of ``doc``."""
    current = plan()
    if current is None or task not in current.tasks:
        raise ReplayError(f"{MODEL_NAME} answers only the tasks lm-eval-fin score replays, not {task!r}")
    path = current.tasks[task]
    for sample in _samples(path):
        if isinstance(sample.get("doc"), dict) and sample["doc"].get("id") == doc.get("id"):
            return runfiles.raw_answer(sample), records.decode(sample.get("filtered_resps"))
    raise ReplayError(f"{path}: no logged answer for document {doc.get('id')!r}")


def register_model() -> None:
    """Register ``--model fin-replay`` with lm-eval (``score`` does it before lm-eval starts)."""
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model as lm_eval_register

    from lm_eval_fin.harness import multistep

    if MODEL_NAME in _registered:
        return

    class ReplayLM(LM):
        """Answers every generation request with the logged answer of its document."""

        def __init__(self, **_model_args: Any) -> None:  # the logged run's model arguments name it; unused
            super().__init__()

        def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
            answers = []
            for request in requests:
                answer, record = logged_answer(request.task_name, request.doc)
                if isinstance(record.get("trace"), dict):  # the steps of a multi-step setting, for the stage
                    multistep.keep_trace(request.task_name, request.doc, record["trace"])
                answers.append(answer)
            return answers

        def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list:
            raise ReplayError(f"{MODEL_NAME} replays generated answers; it has no log-likelihoods")

        def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list:
            raise ReplayError(f"{MODEL_NAME} replays generated answers; it has no log-likelihoods")

    lm_eval_register(MODEL_NAME)(ReplayLM)
    _registered.add(MODEL_NAME)


_registered: set[str] = set()
