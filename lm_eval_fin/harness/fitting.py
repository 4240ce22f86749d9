"""Fitting a prompt into the model's context, with the model's own tokenizer.

lm-eval cuts a prompt that is too long from the left, so the instruction at its top would be
lost without a word. A benchmark whose prompts can outgrow a model's context (a transcript of
20k tokens, a filing's chunks) fits them itself when the dataset loads, cutting only its long
part, and counts what it cut. The model is known from the model arguments lm-eval mixes into
the metadata: ``tokenizer``, ``pretrained`` or ``model`` names it; the context is
``max_length`` (else ``max_model_len``, else the model's config, as lm-eval resolves it);
the answer budget is ``max_gen_toks`` (metadata, else the task YAML's).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

PROMPT_MARGIN_TOKENS = 32  # tokenisation at the cut and template variations


@dataclasses.dataclass
class PromptFitter:
    """How many tokens a prompt may hold: ``max_length`` minus the answer's ``max_gen_toks``."""

    tokenizer: Any
    max_length: int
    max_gen_toks: int

    def tokens(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens of ``prompt`` as the model sees it: in the chat template when there is one."""
        if getattr(self.tokenizer, "chat_template", None):
            prompt = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return len(self.tokens(prompt))

    def room(self, skeleton: str) -> int:
        """Tokens left for the long part of a prompt whose other parts make ``skeleton``."""
        return self.max_length - self.max_gen_toks - self.prompt_tokens(skeleton) - PROMPT_MARGIN_TOKENS

    def head(self, text: str, budget: int) -> str:
        """The first ``budget`` tokens of ``text``."""
        return self.tokenizer.decode(self.tokens(text)[:budget], skip_special_tokens=True)


def prompt_fitter(metadata: Mapping[str, Any], max_gen_toks: int, task: str) -> PromptFitter | None:
    """A fitter for the model named in the metadata, or None (with a warning) when there is
    none or its tokenizer cannot be loaded: the prompts are then used whole."""
    name = next(
        (metadata[k] for k in ("tokenizer", "pretrained", "model") if isinstance(metadata.get(k), str) and metadata[k]),
        None,
    )
    if name is None:
        logger.warning("%s: no tokenizer or pretrained model named; prompts are not fitted to the context", task)
        return None
    try:
        from transformers import AutoConfig, AutoTokenizer

        trust = bool(metadata.get("trust_remote_code", False))
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust)
        max_length = metadata.get("max_length") or metadata.get("max_model_len")
        if not max_length:
            from lm_eval.models.utils import resolve_max_length

            max_length = resolve_max_length(AutoConfig.from_pretrained(name, trust_remote_code=trust), tokenizer)
    except Exception as exc:  # noqa: BLE001 - API models, missing files: run without fitting
        logger.warning("%s: cannot load the tokenizer of %r (%s); prompts are not fitted to the context", task, name, exc)
        return None
    return PromptFitter(tokenizer, int(max_length), int(max_gen_toks))
