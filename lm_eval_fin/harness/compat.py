"""lm-eval's internals that lm-eval-fin uses, in one place, each with a fallback where an lm-eval
release lacks it.

lm-eval's public API (``lm_eval.api``: ``LM``, ``Instance``, ``register_model``, ``get_model``;
``lm_eval.tasks.TaskManager``) is imported where it is used. What is not public (a helper of
its model code, its command-line classes) changes between releases: 0.4.13 has
``lm_eval.models.utils.resolve_max_length``, 0.5.0.dev1 does not.

Our model wrapper (``fin-refine``) is declared in setup.cfg under the entry-point groups of
lm-eval's plug-in proposal (EleutherAI/lm-evaluation-harness#4013, #4014: ``lm_eval.models``,
``lm_eval.filters``, ``lm_eval.metrics``, ``lm_eval.aggregations``; an lm-eval with
``lm_eval.api.registry.load_plugins`` reads them on its own). 0.4.13 and 0.5.0.dev1 read none:
:func:`register_plugins` puts the same entry points in their registries.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
from collections.abc import Callable, Iterator
from typing import Any

# lm-eval's own defaults, for the fallback: a tokenizer without a limit says "1e30"
TOKENIZER_INFINITY = 1000000000000000019884624838656
DEFAULT_MAX_LENGTH = 2048
CONTEXT_ATTRIBUTES = ("n_positions", "max_position_embeddings", "n_ctx")

DISTRIBUTION = "lm-eval-fin"
# entry-point group -> the lm_eval.api.registry registry it fills (lm-eval's plug-in proposal)
PLUGIN_GROUPS = {"lm_eval.models": "model_registry", "lm_eval.filters": "filter_registry",
                 "lm_eval.metrics": "metric_registry", "lm_eval.aggregations": "aggregation_registry"}


def plugin_entry_points() -> list[importlib.metadata.EntryPoint]:
    """Our entry points in lm-eval's plug-in groups, as the installed package declares them."""
    entry_points = importlib.metadata.distribution(DISTRIBUTION).entry_points
    return [entry_point for entry_point in entry_points if entry_point.group in PLUGIN_GROUPS]


def register_plugins() -> list[str]:
    """Our models, filters, metrics and aggregations in lm-eval's registries, each loaded when
    lm-eval first asks for it; the names registered here (none where lm-eval reads the groups
    itself, or where a name is registered already).

    Where lm-eval has ``load_plugins``, it reads the groups. Elsewhere each entry point is
    registered as the lazy ``module:object`` text lm-eval's registries take (their decorator
    then replaces it with the object, which an ``EntryPoint`` placeholder would refuse in 0.4.13
    and 0.5.0.dev1); a registry without lazy entries gets the object, imported now."""
    import lm_eval.models  # noqa: F401 - lm-eval lists its own models only in an empty registry
    from lm_eval.api import registry

    load_plugins = getattr(registry, "load_plugins", None)
    if load_plugins is not None:
        for group, registry_name in PLUGIN_GROUPS.items():
            load_plugins(group, getattr(registry, registry_name))
        return []
    registered = []
    for entry_point in plugin_entry_points():
        target = getattr(registry, PLUGIN_GROUPS[entry_point.group], None)
        if target is None or not hasattr(target, "register"):
            entry_point.load()  # its module's @register_* decorator registers it
        elif entry_point.name not in target:
            target.register(entry_point.name, target=entry_point.value)
        else:
            continue
        registered.append(entry_point.name)
    return registered


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


@contextlib.contextmanager
def samples_before_output(edit: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """While lm-eval's command line runs, ``edit`` gets each run's results (samples included)
    once lm-eval has aggregated them and before its loggers (W&B, the Hub) and its writers read
    them. lm-eval's ``run`` (0.4.13 and 0.5) takes ``simple_evaluate`` from the ``lm_eval``
    package when it runs, so that name is wrapped; a release that takes it elsewhere leaves the
    results unedited (the fallback: lm-eval's own output)."""
    import lm_eval

    own = lm_eval.__dict__.get("simple_evaluate")  # None: lm-eval imports it lazily (__getattr__)
    original = lm_eval.simple_evaluate

    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        results = original(*args, **kwargs)
        if isinstance(results, dict):
            edit(results)
        return results

    lm_eval.simple_evaluate = simple_evaluate
    try:
        yield
    finally:
        if own is None:
            del lm_eval.simple_evaluate
        else:
            lm_eval.simple_evaluate = own
