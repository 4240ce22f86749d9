"""How a user names a judge: one spec string plus decoding/serving options, the same on every
``lm-eval-fin`` subcommand and in the ``LM_EVAL_FIN_JUDGE`` environment variable.

Options (flag, field, what it does):

``--judge_max_tokens`` (``max_tokens``)
    answer length for requests that do not set their own ``max_tokens``.
``--judge_temperature`` / ``--judge_seed`` (``temperature``, ``seed``)
    decoding; the default is greedy (0) with seed 0, so a judge's scores are reproducible.
    Retries of unparsable answers sample instead (see :mod:`lm_eval_fin.judge.core`).
``--judge_concurrency`` (``concurrency``)
    openai backend: requests in flight at once, per endpoint (a spec may list several).
``--judge_timeout`` (``timeout_s``)
    openai backend: seconds one HTTP request may take from start to end (connecting, waiting
    and reading the body), after which it counts as failed; a server that trickles its
    answer a byte at a time is cut at this point too.
``--judge_max_retries`` (``max_retries``), ``--judge_backoff`` (``backoff_s``),
``--judge_backoff_max`` (``backoff_max_s``)
    openai backend: a failed request (refused connection, timeout, 408/409/429, 5xx,
    malformed reply) is re-sent up to ``max_retries`` times, waiting ``backoff_s * 2**k``
    seconds, at most ``backoff_max_s``, before retry ``k + 1``. A 429 or 503 answer with a
    ``Retry-After`` header (seconds or an HTTP date) sets that wait instead, also capped at
    ``backoff_max_s``.
``--judge_batch_deadline`` (``batch_deadline_s``)
    openai and hf backends: seconds one batch (one ``judge.complete`` call: a stage's
    requests, or one round of re-asks of unparsable answers) may take in all. Requests not
    finished by then fail with an error that says so; those finished are kept (cached).
    Default None: no batch deadline.
``--judge_retry_unparsable`` (``retry_unparsable``)
    ``yes`` (default) or ``no``. With ``yes``, a cached answer that the caller's parser rejects
    is sent to the judge again on the next run and the new answer replaces it, so a run after
    fixing a judge (its model, its chat template) recovers; ``no`` keeps cached answers as
    they are (a re-run sends nothing for them).
``--judge_max_reply_bytes`` (``max_reply_bytes``)
    the longest reply (UTF-8 bytes) the cache stores, 1 MB by default (a judge's verdict is a
    few hundred bytes; the longest request, an EMS extraction, some kilobytes). A longer
    reply, from a server that ignores ``max_tokens``, is a failure of its request: not
    cached, not scored, counted under ``judge_failure``.
``--judge_batch_size`` (``batch_size``)
    hf backend: prompts per ``generate`` call (default 8); vllm backend: prompts per
    ``LLM.chat`` call (default 1024). Results reach the cache after each such chunk.
``--judge_tensor_parallel_size``, ``--judge_gpu_memory_utilization``,
``--judge_max_model_len``
    vllm backend: passed to ``vllm.LLM``.

Where options come from, later ones winning: the defaults above, ``$LM_EVAL_FIN_JUDGE_OPTIONS``
(a JSON object of fields, e.g. ``{"max_retries": 2}``; ``lm-eval-fin run --judge_max_retries 2``
sets it for the harness), then the flags given on the command line or, inside an ``lm_eval``
run, a task's ``--metadata`` (``judge_<field>`` keys, or a ``judge_options`` object; see
:func:`options_from_metadata`).

Worst-case wall time with the default options (openai backend; each figure is an upper
bound, reached only by a server that answers nothing useful):

* one request: ``(max_retries + 1) * timeout_s + max_retries * backoff_max_s`` =
  5 * 120 + 4 * 10 = 640 s (with the exponential backoff and no ``Retry-After``: 607.5 s).
* one batch, server down or hung: the batch stops sending once ``max(8, 2 * concurrency * endpoints)``
  requests in a row have failed after their retries, and requests in flight then are not
  retried again. With ``concurrency`` 8 that is two rounds of 8 requests of 640 s each, plus
  one ``timeout_s`` for those in flight: 2 * 640 + 120 = 1400 s, about 23 minutes.
* one batch, server alive but failing part of the requests: no bound but
  ``ceil(requests / concurrency) * 640`` s, because each answer resets the count above. Set
  ``batch_deadline_s`` to bound a batch whatever the server does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.plumbing.flags import add_flag

JUDGE_ENV = "LM_EVAL_FIN_JUDGE"
JUDGE_OPTIONS_ENV = "LM_EVAL_FIN_JUDGE_OPTIONS"


@dataclass(frozen=True)
class JudgeOptions:
    max_tokens: int = 1024
    temperature: float = 0.0
    seed: int = 0
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0
    batch_deadline_s: float | None = None
    retry_unparsable: bool = True
    max_reply_bytes: int = 1_000_000
    batch_size: int | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None


# option field -> its flag, for the flags that are not --judge-<field with dashes>
_FLAG_NAMES = {"timeout_s": "timeout", "backoff_s": "backoff", "backoff_max_s": "backoff_max",
               "batch_deadline_s": "batch_deadline"}
# fields that must be above zero (the others but temperature and seed must not be negative)
_POSITIVE_FIELDS = frozenset({"concurrency", "timeout_s", "batch_deadline_s", "batch_size", "max_reply_bytes",
                              "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "max_tokens"})
_SIGNED_FIELDS = frozenset({"temperature", "seed"})
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def option_fields() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(JudgeOptions))


def _field_type(name: str) -> tuple[type, bool]:
    """(bool, int or float; whether None is allowed) of option ``name``, from its annotation."""
    annotation = str(next(f.type for f in dataclasses.fields(JudgeOptions) if f.name == name))
    kind = next(kind for kind in (bool, int, float) if annotation.split(" ")[0] == kind.__name__)
    return kind, "None" in annotation


def flag_of(field_name: str) -> str:
    """``max_retries`` -> ``--judge_max_retries``; ``timeout_s`` -> ``--judge_timeout``."""
    return "--judge_" + _FLAG_NAMES.get(field_name, field_name)


def parse_bool(value: Any) -> bool | None:
    """True/False from a bool, 0/1, or yes/no, true/false, on/off (any case); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
    return None


def check_option(name: str, value: Any, where: str = "judge option") -> Any:
    """``value`` as the type of option ``name`` (a number or a yes/no written as a string is
    read); ValueError naming ``where`` if it is not one, or out of range."""
    kind, optional = _field_type(name)
    if value is None and optional:
        return None
    if kind is bool:
        flag = parse_bool(value)
        if flag is None:
            raise ValueError(f"{where} {name}: expected yes or no (true/false, on/off, 1/0), got {value!r}")
        return flag
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or (kind is int and value != int(value)):
        raise ValueError(f"{where} {name}: expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    if name in _POSITIVE_FIELDS and value <= 0:
        raise ValueError(f"{where} {name}: must be above 0, got {value!r}")
    if name not in _SIGNED_FIELDS and value < 0:
        raise ValueError(f"{where} {name}: must not be negative, got {value!r}")
    return int(value) if kind is int else float(value)


def check_options(options: Mapping[str, Any], where: str = "judge option") -> dict[str, Any]:
    """``options`` (field -> value) checked and converted; unknown names are a ValueError
    that lists the known ones."""
    known = option_fields()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown {where}(s) {unknown}; known: {list(known)}")
    return {name: check_option(name, value, where) for name, value in options.items()}


def options_from_env() -> dict[str, Any]:
    """The options set in ``$LM_EVAL_FIN_JUDGE_OPTIONS`` (field -> value), checked."""
    text = os.environ.get(JUDGE_OPTIONS_ENV, "").strip()
    if not text:
        return {}
    return check_options(_options_object(text, f"${JUDGE_OPTIONS_ENV}"), f"${JUDGE_OPTIONS_ENV} option")


def _options_object(value: Any, where: str) -> dict:
    """``value`` as an object of judge options: a dict, or a JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{where} is not JSON ({exc}): {value!r}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object of judge options, got {value!r}")
    return value


def options_from_metadata(metadata: Mapping[str, Any], task: str = "task") -> dict[str, Any]:
    """The judge options in a task's ``--metadata``: ``judge_<field>`` keys (``judge_max_retries``)
    and a ``judge_options`` object (``{"max_retries": 2}``), the flat keys winning. Checked;
    ValueError names the task and the known keys."""
    flat = {
        key[len("judge_"):]: value for key, value in metadata.items()
        if key.startswith("judge_") and key != "judge_options"
    }
    nested = _options_object(metadata.get("judge_options") or {}, f"{task}: metadata judge_options")
    known = option_fields()
    unknown = sorted({f"judge_{name}" for name in flat if name not in known}
                     | {f"judge_options.{name}" for name in nested if name not in known})
    if unknown:
        raise ValueError(
            f"{task}: unknown judge option(s) {unknown} in the metadata; known: "
            f"{sorted('judge_' + name for name in known)} (or the same names without judge_ in judge_options)"
        )
    return check_options({**nested, **flat}, f"{task} metadata judge option")


def resolve_options(overrides: Mapping[str, Any] | None = None) -> JudgeOptions:
    """The defaults, then ``$LM_EVAL_FIN_JUDGE_OPTIONS``, then ``overrides`` (checked)."""
    return JudgeOptions(**{**options_from_env(), **check_options(overrides or {})})


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    """``--judge`` and the option flags. A flag left out is None in ``args`` and takes its value
    from ``$LM_EVAL_FIN_JUDGE_OPTIONS`` or the defaults in :func:`options_from_args`."""
    group = parser.add_argument_group("judge")
    group.add_argument(
        "--judge",
        default=os.environ.get(JUDGE_ENV),
        help=f"judge spec: vllm:<model>, openai:<base url>[,<base url>...]#<model>, hf:<model or path>[#<gguf file>] "
        f"(default: ${JUDGE_ENV})",
    )
    defaults = JudgeOptions()

    def option(name: str, kind: type | Callable[[str], Any], what: str, default: Any, **more: Any) -> None:
        add_flag(group, f"--judge_{name}", type=kind, default=None,
                           help=f"{what} (default: {default})", **more)

    option("max_tokens", int, "answer length of requests that set none", defaults.max_tokens)
    option("temperature", float, "decoding temperature; 0 is greedy", f"{defaults.temperature:g}")
    option("seed", int, "decoding seed", defaults.seed)
    option("concurrency", int, "openai: requests in flight per endpoint", defaults.concurrency)
    option("timeout", float, "openai: seconds one request may take, connecting and reading included",
           f"{defaults.timeout_s:g}")
    option("max_retries", int, "openai: re-sends of a failed request", defaults.max_retries)
    option("backoff", float, "openai: first wait before a re-send in seconds, doubled each time",
           f"{defaults.backoff_s:g}")
    option("backoff_max", float, "openai: longest wait before a re-send in seconds, Retry-After included",
           f"{defaults.backoff_max_s:g}")
    option("batch_deadline", float, "openai, hf: seconds one batch may take in all; requests not finished by then "
           "fail, finished ones are kept", "no deadline")
    option("retry_unparsable", _yes_no, "send a cached answer the parser rejects to the judge again (yes); no keeps "
           "cached answers as they are", "yes", metavar="{yes,no}")
    option("max_reply_bytes", int, "the longest reply the cache stores; a longer one fails its request",
           defaults.max_reply_bytes)
    option("batch_size", int, "prompts per generate call (hf) or LLM.chat call (vllm)", "8 for hf, 1024 for vllm")
    option("tensor_parallel_size", int, "vllm: GPUs the judge model spans", defaults.tensor_parallel_size)
    option("gpu_memory_utilization", float, "vllm: share of the GPU's memory the engine takes",
           f"{defaults.gpu_memory_utilization:g}")
    option("max_model_len", int, "vllm: the judge's context length", "the model's")


def _yes_no(text: str) -> bool:
    flag = parse_bool(text)
    if flag is None:
        raise argparse.ArgumentTypeError(f"expected yes or no, got {text!r}")
    return flag


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The option flags given on the command line (field -> value)."""
    given = {}
    for name in option_fields():
        value = getattr(args, flag_of(name)[2:], None)
        if value is not None:
            given[name] = value
    return given


def options_from_args(args: argparse.Namespace) -> JudgeOptions:
    """The flags given, over ``$LM_EVAL_FIN_JUDGE_OPTIONS``, over the defaults."""
    return resolve_options(given_options(args))
