"""``--model fin-refine``: a model wrapper that runs a benchmark's multi-step generation.

lm-eval asks a model for one completion per request, and a task cannot ask again once it has
seen the answer. Some settings need several steps per example: FinLFQA's post-hoc setting
(answer, then attribute the answer) and its iterative refinement (answer, run the code, ask
for feedback, revise, until the model says it is done). They run inside this wrapper, which
lm-eval loads like any model::

    lm-eval-fin run --model fin-refine --model_args base=hf,pretrained=<model>,dtype=float32 \\
        --tasks fin_lfqa-iterative --apply_chat_template --confirm_run_unsafe_code ...

``base`` names the lm-eval model that answers (``hf``, ``vllm``, ``local-chat-completions``,
...); every other model argument is the base model's. A document that names a *protocol* in
its ``protocol`` field (a benchmark registers it with :func:`register_protocol` when its task
module loads) is handed to that protocol with the base model's first answer; the protocol
asks for its follow-up steps in batches, one batch per step across all documents, and its
final text is the request's answer. Every other request (any task, ``loglikelihood``
included) goes to the base model untouched, so the wrapper can run a whole suite.

Follow-up prompts are rendered the way lm-eval rendered the first: in the base model's chat
template when the run uses ``--apply_chat_template`` (the wrapper sees lm-eval render through
it), with the first request's generation settings. What each protocol did (its steps, rounds,
replies) is kept per document (:func:`take_trace`) for the task's ``process_results``; a
response lm-eval's ``--use_cache`` served from its cache has no trace.

The wrapper is this package's entry point ``fin-refine`` in the ``lm_eval.models`` group, which
an lm-eval with plug-in discovery reads itself; 0.4.13 and 0.5.0.dev1 do not: ``lm-eval-fin run``
registers it (:func:`lm_eval_fin.harness.compat.register_plugins`); from Python, call that (or
``import lm_eval_fin.harness.multistep``) before ``lm_eval.simple_evaluate(model="fin-refine", ...)``.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import lm_eval.models  # noqa: F401 - lm-eval's own models first: it lists them only in an empty registry
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.api.registry import get_model, register_model

logger = logging.getLogger(__name__)

MODEL_NAME = "fin-refine"
PROTOCOL_FIELD = "protocol"

# generate(documents, prompts) -> replies: one follow-up step for some of a protocol's
# documents (positions in the list the protocol was given), one batch.
Generate = Callable[[Sequence[int], Sequence[str]], list[str]]
# protocol(documents, first replies, generate) -> [(final text, trace)], one per document
Protocol = Callable[[Sequence[dict], Sequence[str], Generate], list[tuple[str, dict]]]

_PROTOCOLS: dict[str, Protocol] = {}
_TRACES: dict[tuple[str, str], dict] = {}
_LIVE: weakref.WeakSet = weakref.WeakSet()


def register_protocol(name: str, protocol: Protocol) -> None:
    """Make ``protocol`` run documents whose ``protocol`` field is ``name``."""
    _PROTOCOLS[name] = protocol


def wrapper_loaded() -> bool:
    """Whether a fin-refine model exists in this process (lm-eval builds the model before it
    loads the tasks, so a task's loader can tell whether its protocol will run)."""
    return len(_LIVE) > 0


def trace_key(task: str, doc: dict) -> tuple[str, str]:
    return task, str(doc.get("id"))


def keep_trace(task: str, doc: dict, trace: dict) -> None:
    """Keep what a protocol did for this document of ``task`` until the task takes it."""
    _TRACES[trace_key(task, doc)] = trace


def take_trace(task: str, doc: dict) -> dict | None:
    """What the protocol did for this document of ``task`` (removed once taken), or None."""
    return _TRACES.pop(trace_key(task, doc), None)


def _split_model_args(base: str, kwargs: dict[str, Any]) -> tuple[type[LM], dict[str, Any]]:
    if not isinstance(base, str) or not base or base == MODEL_NAME:
        raise ValueError(
            f"{MODEL_NAME}: model argument base must name another lm-eval model (hf, vllm, ...), got {base!r}"
        )
    try:
        return get_model(base), kwargs
    except ValueError as exc:
        raise ValueError(f"{MODEL_NAME}: base={base!r}: {exc}") from None


@register_model(MODEL_NAME)
class MultiStepLM(LM):
    """A base lm-eval model, plus the multi-step protocols documents ask for."""

    def __init__(self, base: str = "", **base_args: Any) -> None:
        super().__init__()
        model_class, base_args = _split_model_args(base, base_args)
        self.base_name = base
        self.base: LM = model_class.create_from_arg_obj(base_args)
        self.chat = False  # whether lm-eval rendered the run's prompts in the chat template
        _LIVE.add(self)
        logger.info("%s: %s answers; multi-step protocols: %s", MODEL_NAME, base, sorted(_PROTOCOLS) or "none yet")

    # ----------------------------------------------------------- what lm-eval asks of a model

    def loglikelihood(self, requests: list[Instance]) -> list:
        return self.base.loglikelihood(requests)

    def loglikelihood_rolling(self, requests: list[Instance]) -> list:
        return self.base.loglikelihood_rolling(requests)

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        replies = self.base.generate_until(requests)
        by_protocol: dict[str, list[int]] = {}
        for position, request in enumerate(requests):
            name = request.doc.get(PROTOCOL_FIELD) if isinstance(request.doc, dict) else None
            if name:
                if name not in _PROTOCOLS:
                    raise ValueError(f"{MODEL_NAME}: document {request.doc.get('id')!r} asks for protocol {name!r}, "
                                     f"which no loaded task registered (known: {sorted(_PROTOCOLS)})")
                by_protocol.setdefault(name, []).append(position)
        for name, positions in by_protocol.items():
            chosen = [requests[p] for p in positions]
            first = [replies[p] for p in positions]
            outcomes = _PROTOCOLS[name]([r.doc for r in chosen], first, self._generator(chosen))
            for position, request, (text, trace) in zip(positions, chosen, outcomes):
                replies[position] = text
                keep_trace(request.task_name, request.doc, trace)
        return replies

    def _generator(self, requests: Sequence[Instance]) -> Generate:
        def generate(which: Sequence[int], prompts: Sequence[str]) -> list[str]:
            if not which:
                return []
            # the first request with the follow-up prompt: its task, document and settings as
            # whichever lm-eval release made it keeps them (0.5 takes task_name and doc_id as
            # fields, 0.4.13 unpacks them from metadata)
            follow_ups = [
                dataclasses.replace(requests[i], arguments=(self._render(prompt), dict(requests[i].args[1])),
                                    idx=0, resps=[], filtered_resps={})
                for i, prompt in zip(which, prompts)
            ]
            return list(self.base.generate_until(follow_ups))

        return generate

    def _render(self, prompt: str) -> str:
        if not self.chat:
            return prompt
        return self.base.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        self.chat = True
        return self.base.apply_chat_template(chat_history, add_generation_prompt=add_generation_prompt)

    # ------------------------------------------------------------ the rest is the base model's

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self.base.chat_template(chat_template)

    @property
    def tokenizer_name(self) -> str:
        return self.base.tokenizer_name

    @property
    def rank(self) -> int:
        return self.base.rank

    @property
    def world_size(self) -> int:
        return self.base.world_size

    @property
    def device(self):
        return self.base.device

    def all_gather(self, tensor):
        return self.base.all_gather(tensor)

    def gather_object(self, obj, dst=0):
        return self.base.gather_object(obj, dst)

    def barrier(self) -> None:
        self.base.barrier()

    def get_model_info(self) -> dict:
        info: dict[str, Any] = getattr(self.base, "get_model_info", dict)()
        return {**info, "multistep_base": self.base_name}

    def __getattr__(self, name: str) -> Any:  # batch_sizes, tokenizer, ...: the base model's
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)
