"""``hf:<model id or path>[#<gguf file>]``: a transformers model as the judge, CPU or GPU.

Batched generation: requests are grouped by decoding parameters, sorted by prompt length
(so a batch pads little) and generated ``batch_size`` at a time (``--judge_batch_size``,
default 8) with left padding and the model's chat template. Temperature 0 is greedy
decoding; otherwise sampling with ``torch.manual_seed(seed)`` before each batch (a batch
only holds requests with the same seed). The model runs on CUDA when available (bfloat16
where supported), else on CPU in float32. A GGUF file is de-quantised by transformers on
load (slow on CPU; convert once and point at the folder instead).

Output constraints. Plain transformers cannot enforce a JSON schema, a regex or a choice
list during generation, and this backend does not pretend to: the request's messages are
sent unchanged (the caller's prompt already asks for the format), the answer comes back
as generated, and the caller's tolerant parser decides (see ``complete_parsed``, which
re-asks unparsable answers). A warning says so once per process and constraint kind, and
each batch counts such requests in ``stats.extra["unenforced_constraints"]``. Use the vllm
or openai backend where enforcement matters.

A model that cannot be loaded (no such hub id or folder, no chat template, files that are
not a transformers model) raises :class:`~lm_eval_fin.judge.base.JudgeConfigError` with a
one-line message; other exceptions (out of memory) propagate. With ``batch_deadline_s``,
the deadline is checked between ``generate`` calls: what is left when it passes fails with
an error that says so. Batches finished before either are already in the cache.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.judge.base import JudgeConfigError, JudgeRequest, JudgeResponse
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.preflight import model_problem
from lm_eval_fin.judge.spec import BackendKind, JudgeSpec, register_backend
from lm_eval_fin.text.cleantext import one_line

logger = logging.getLogger("lm_eval_fin.judge")

DEFAULT_BATCH_SIZE = 8
_warned_constraints: set[str] = set()


def _warn_unenforced(kind: str, model: str) -> None:
    if kind in _warned_constraints:
        return
    _warned_constraints.add(kind)
    logger.warning(
        "hf judge %s: transformers cannot enforce %s constraints; the prompt asks for the format "
        "and the answer is checked by the caller's parser (use a vllm or openai judge to enforce it)",
        model, kind,
    )


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (transformers' are paragraphs)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return one_line(f"{type(exc).__name__}: {lines[0] if lines else ''}", 240)


class HFBackend:
    def __init__(self, spec: JudgeSpec, options: JudgeOptions):
        self.spec = spec
        self.batch_size = options.batch_size or DEFAULT_BATCH_SIZE
        # Any: transformers' annotations do not follow these calls (apply_chat_template's
        # return type depends on its flags; generate belongs to the class the Auto loader picks)
        self.model: Any = None
        self.tokenizer: Any = None

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        extra = {"gguf_file": self.spec.gguf_file} if self.spec.gguf_file else {}
        if torch.cuda.is_available():
            device = "cuda"
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            device, dtype = "cpu", torch.float32
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.spec.model, **extra)
            model = AutoModelForCausalLM.from_pretrained(self.spec.model, dtype=dtype, **extra)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            offline = " (HF_HUB_OFFLINE is set: only models already downloaded)" if os.environ.get("HF_HUB_OFFLINE") else ""
            raise JudgeConfigError(
                f"hf judge: cannot load the model '{one_line(self.spec.model, 200)}' ({_first_line(exc)}); give a "
                f"transformers model folder or a Hugging Face model id that can be loaded here{offline}"
            ) from exc
        if not getattr(tokenizer, "chat_template", None):
            raise JudgeConfigError(
                f"hf judge: the model '{one_line(self.spec.model, 200)}' has no chat template; a judge must be an "
                "instruction-tuned chat model"
            )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        # transformers wraps to() with functools.wraps(Module.to), whose type reads as unbound
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        self.tokenizer = tokenizer
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos])

    def _batches(self, requests: Sequence[JudgeRequest]) -> list[list[int]]:
        """Indices grouped by decoding parameters, each group sorted by prompt size."""

        def params(i: int):
            r = requests[i]
            return (r.max_tokens, r.temperature, r.seed if r.temperature else 0)

        order = sorted(range(len(requests)), key=lambda i: (params(i), sum(len(m["content"]) for m in requests[i].messages)))
        batches: list[list[int]] = []
        for _, group in itertools.groupby(order, key=params):
            members = list(group)
            batches += [members[s : s + self.batch_size] for s in range(0, len(members), self.batch_size)]
        return batches

    def _completion_length(self, row) -> int:
        """Generated tokens up to and including the first end-of-sequence token."""
        for position, token in enumerate(row.tolist()):
            if token in self.eos_ids:
                return position + 1
        return len(row)

    def run(self, requests: Sequence[JudgeRequest], sink) -> None:
        import torch

        for request in requests:
            constraint = request.constraint
            if constraint is not None:
                kind = next(iter(constraint))
                _warn_unenforced(kind, self.spec.model)
                sink.note("unenforced_constraints")
        if self.model is None:
            self._load()
        batches = self._batches(requests)
        for number, batch in enumerate(batches):
            if sink.expired():
                error = sink.deadline_error()
                sink.done_many([(index, JudgeResponse(None, error=error)) for rest in batches[number:] for index in rest])
                return
            first = requests[batch[0]]
            encoded = self.tokenizer.apply_chat_template(
                [list(requests[i].messages) for i in batch],
                add_generation_prompt=True,
                tokenize=True,
                padding=True,
                return_dict=True,
                return_tensors="pt",
            ).to(self.model.device)
            assert first.temperature is not None, "the judge resolves each request before its backend sees it"
            sampling = first.temperature > 0
            kwargs = {"max_new_tokens": first.max_tokens, "do_sample": sampling,
                      "pad_token_id": self.tokenizer.pad_token_id}
            if sampling:
                kwargs.update(temperature=first.temperature, top_p=1.0, top_k=0)
                torch.manual_seed(first.seed)
            else:
                kwargs.update(temperature=None, top_p=None, top_k=None)
            with torch.inference_mode():
                output = self.model.generate(**encoded, **kwargs)
            prompt_width = encoded["input_ids"].shape[1]
            finished = []
            for row_index, request_index in enumerate(batch):
                generated = output[row_index, prompt_width:]
                length = self._completion_length(generated)
                text = self.tokenizer.decode(generated[:length], skip_special_tokens=True)
                finished.append((request_index, JudgeResponse(
                    text,
                    prompt_tokens=int(encoded["attention_mask"][row_index].sum()),
                    completion_tokens=length,
                )))
            sink.done_many(finished)

    def close(self) -> None:
        self.model = None
        self.tokenizer = None


def parse_hf(rest: str) -> JudgeSpec | None:
    """``<model id or path>[#<gguf file>]``."""
    model, hash_, gguf_file = rest.rpartition("#") if "#" in rest else (rest, "", "")
    model, gguf_file = model.strip(), gguf_file.strip()
    if not model or (hash_ and not gguf_file):
        return None
    return JudgeSpec("hf", model, gguf_file=gguf_file or None)


register_backend(BackendKind(
    name="hf",
    form="hf:<model id or path>[#<gguf file>]",
    parse=parse_hf,
    build=HFBackend,
    problem=model_problem,
    ready="transformers, model found",
))
