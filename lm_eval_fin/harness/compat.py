"""lm-eval's internals that lm-eval-fin uses, in one place, each with a fallback where an lm-eval
release lacks it.

lm-eval's public API (``lm_eval.api``: ``LM``, ``Instance``, ``register_model``, ``get_model``;
``lm_eval.tasks.TaskManager``) is imported where it is used. What is not public (a helper of
its model code, its command-line classes) changes between releases: 0.4.13 has
``lm_eval.models.utils.resolve_max_length``, 0.5.0.dev1 does not.
"""

from __future__ import annotations

import argparse
from typing import Any

# lm-eval's own defaults, for the fallback: a tokenizer without a limit says "1e30"
TOKENIZER_INFINITY = 1000000000000000019884624838656
DEFAULT_MAX_LENGTH = 2048
CONTEXT_ATTRIBUTES = ("n_positions", "max_position_embeddings", "n_ctx")


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """The model's context in tokens, as lm-eval's hf model reads it: lm-eval's own helper where
    the installed lm-eval has it, else the same reading (the text model's config, then the
    tokenizer's ``model_max_length``, then lm-eval's default)."""
    try:
        from lm_eval.models.utils import resolve_max_length as lm_eval_resolve
    except ImportError:
        return max_length_of(config, tokenizer)
    return int(lm_eval_resolve(config, tokenizer))


def max_length_of(config: Any, tokenizer: Any) -> int:
    text_config = getattr(config, "text_config", None) or config
    for attribute in CONTEXT_ATTRIBUTES:
        value = getattr(text_config, attribute, None)
        if value is not None:
            return int(value)
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if model_max_length is not None and model_max_length != TOKENIZER_INFINITY:
        return int(model_max_length)
    return DEFAULT_MAX_LENGTH


def run_arguments(args: list[str]) -> argparse.Namespace:
    """lm-eval's own parser of ``lm_eval run`` on ``args`` (0.4.13 and 0.5: ``HarnessCLI``)."""
    from lm_eval._cli.harness import HarnessCLI

    return HarnessCLI()._subparsers.choices["run"].parse_args(args)


def cli_evaluate() -> None:
    """lm-eval's command line on ``sys.argv``."""
    from lm_eval.__main__ import cli_evaluate as lm_eval_cli

    lm_eval_cli()
