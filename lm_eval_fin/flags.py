"""One flag style for every ``lm-eval-fin`` command: lm-eval's snake_case.

A flag is declared by its snake_case name (``--judge_max_tokens``); the kebab-case spelling
earlier versions used (``--judge-max-tokens``) stays accepted as a hidden alias
(:func:`spellings`), and :class:`HelpFormatter` shows only the snake_case one, each option's
help ending with its default written one way, ``(default: X)``.
"""

from __future__ import annotations

import argparse
import copy


def spellings(name: str) -> tuple[str, ...]:
    """``name`` (``--snake_case``) and its kebab-case alias, when it has one.

    >>> spellings("--doc_types"), spellings("--seed")
    (('--doc_types', '--doc-types'), ('--seed',))
    """
    if not name.startswith("--") or "-" in name[2:]:
        raise ValueError(f"flag {name!r}: declare flags as --snake_case")
    alias = "--" + name[2:].replace("_", "-")
    return (name,) if alias == name else (name, alias)


def is_alias(option: str) -> bool:
    """Whether ``option`` is a kebab-case alias (``--judge-seed``), not a canonical spelling."""
    return option.startswith("--") and "-" in option[2:]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Options under their snake_case spelling only; every option's help ends with
    ``(default: X)`` unless it already says its default or has none worth saying."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [option for option in action.option_strings if not is_alias(option)]
        if not action.option_strings or shown == action.option_strings or not shown:
            return super()._format_action_invocation(action)
        canonical = copy.copy(action)
        canonical.option_strings = shown
        return super()._format_action_invocation(canonical)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default in (None, argparse.SUPPRESS, False) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"
