"""Fitting a prompt into the model's context, with the model's own tokenizer.

lm-eval cuts a prompt that is too long from the left, so the instruction at its top would be
lost without a word. A benchmark whose prompts can outgrow a model's context (a transcript of
20k tokens, a filing's chunks) fits them itself when the dataset loads, cutting only its long
part, and counts what it cut. The model is known from the model arguments lm-eval mixes into
the metadata, read as lm-eval's ``hf`` and ``vllm`` models read them: the tokenizer is
``tokenizer``, else ``pretrained`` (or an API model's ``model``), loaded with ``revision``
(vllm: ``tokenizer_revision``), ``trust_remote_code``, ``subfolder``, ``gguf_file`` (when no
separate tokenizer is named), ``use_fast_tokenizer`` / ``tokenizer_mode=slow`` and
``add_bos_token``; the context is ``max_length`` (else ``max_model_len``, else the model's
config, as lm-eval resolves it); the answer budget is ``max_gen_toks`` (metadata, else the task
YAML's).

A model is named but its tokenizer (or, without ``max_length``, its config) does not load: the
load stops with a :class:`~lm_eval_fin.harness.settings.SettingsError` in one line, before any
generation, since sending the prompts whole would let lm-eval cut them in silence. Naming a
tokenizer that loads (``tokenizer=<hub id or folder>`` and ``max_length=<context>``, say for an
API model) fits the prompts with it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from lm_eval_fin.harness.settings import SettingsError
from lm_eval_fin.text.cleantext import one_line

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


def _name(metadata: Mapping[str, Any], *keys: str) -> str | None:
    return next((metadata[k] for k in keys if isinstance(metadata.get(k), str) and metadata[k]), None)


def _flag(value: Any) -> bool:
    """A boolean model argument: lm-eval hands ``True``, or the string when it did not parse one."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def tokenizer_arguments(metadata: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The name and keyword arguments ``AutoTokenizer.from_pretrained`` gets for the model the
    metadata names, as lm-eval's ``hf`` model builds them (with vllm's spellings); the name is
    None when no model is named."""
    separate = _name(metadata, "tokenizer")
    name = separate or _name(metadata, "pretrained", "model")
    kwargs: dict[str, Any] = {"trust_remote_code": _flag(metadata.get("trust_remote_code", False))}
    revision = _name(metadata, "tokenizer_revision", "revision")
    if revision:
        kwargs["revision"] = revision
    gguf_file = _name(metadata, "gguf_file")
    if gguf_file and not separate:  # a GGUF file holds its tokenizer; "use_fast" does not apply
        kwargs["gguf_file"] = gguf_file
    elif metadata.get("tokenizer_mode") == "slow":
        kwargs["use_fast"] = False
    elif "use_fast_tokenizer" in metadata:
        kwargs["use_fast"] = _flag(metadata["use_fast_tokenizer"])
    if _name(metadata, "subfolder"):
        kwargs["subfolder"] = metadata["subfolder"]
    if metadata.get("add_bos_token") is not None:
        kwargs["add_bos_token"] = _flag(metadata["add_bos_token"])
    return name, kwargs


def config_arguments(metadata: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The model's config, for its context length: ``pretrained`` (else ``model``, else the
    tokenizer) with its revision, subfolder and GGUF file."""
    model = _name(metadata, "pretrained", "model")
    kwargs: dict[str, Any] = {"trust_remote_code": _flag(metadata.get("trust_remote_code", False))}
    for key in ("revision", "subfolder", "gguf_file") if model else ("revision",):
        if _name(metadata, key):
            kwargs[key] = metadata[key]
    return model or _name(metadata, "tokenizer"), kwargs


def prompt_fitter(metadata: Mapping[str, Any], max_gen_toks: int, task: str) -> PromptFitter | None:
    """A fitter for the model named in the metadata, or None (with a warning) when no model is
    named (a loader called without a model: there is no context to fit). A model whose
    tokenizer or context length cannot be read raises :class:`SettingsError`."""
    name, kwargs = tokenizer_arguments(metadata)
    if name is None:
        logger.warning("%s: no tokenizer or pretrained model named; prompts are not fitted to the context", task)
        return None
    hint = (
        "its prompts can outgrow the context and lm-eval would cut them from the left; name a tokenizer that "
        "loads here with tokenizer=<hub id or folder> (and the context with max_length=<tokens>) in --model_args"
    )
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure to load: a missing file, an API model's name, no network
        raise SettingsError(
            f"{task}: cannot fit prompts to the model's context: the tokenizer of {name!r} does not load "
            f"({one_line(exc, 200)}); {hint}"
        ) from None
    max_length = metadata.get("max_length") or metadata.get("max_model_len")
    if not max_length:
        config_name, config_kwargs = config_arguments(metadata)
        assert config_name is not None, "the model named for the tokenizer names the config too"
        try:
            from transformers import AutoConfig

            from lm_eval_fin.harness.compat import resolve_max_length

            max_length = resolve_max_length(AutoConfig.from_pretrained(config_name, **config_kwargs), tokenizer)
        except Exception as exc:  # noqa: BLE001 - as above, for the config
            raise SettingsError(
                f"{task}: cannot fit prompts to the model's context: the config of {config_name!r} does not load "
                f"({one_line(exc, 200)}); pass the context with max_length=<tokens> in --model_args"
            ) from None
    return PromptFitter(tokenizer, int(max_length), int(max_gen_toks))
