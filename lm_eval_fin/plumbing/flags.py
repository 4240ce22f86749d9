"""One flag style for every ``lm-eval-fin`` command: lm-eval's snake_case.

A flag is declared by its snake_case name (``--judge_max_tokens``, :func:`add_flag`); the
kebab-case spelling earlier versions used (``--judge-max-tokens``) stays accepted as a hidden
alias, and help and error messages name only the snake_case one (:class:`HelpFormatter` ends
each option's help with its default written one way, ``(default: X)``).
"""

from __future__ import annotations

import argparse
from typing import Any


def spellings(name: str) -> tuple[str, ...]:
    """``name`` (``--snake_case``) and its kebab-case alias, when it has one.

    >>> spellings("--doc_types"), spellings("--seed")
    (('--doc_types', '--doc-types'), ('--seed',))
    """
    if not name.startswith("--") or "-" in name[2:]:
        raise ValueError(f"flag {name!r}: declare flags as --snake_case")
    alias = "--" + name[2:].replace("_", "-")
    return (name,) if alias == name else (name, alias)


def add_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup, name: str, **options: Any) -> argparse.Action:
    """``parser.add_argument(name, **options)`` for a ``--snake_case`` flag, and its kebab-case
    spelling as a hidden alias of its own (so help and error messages name the snake_case one)."""
    action = parser.add_argument(name, **options)
    for alias in spellings(name)[1:]:
        hidden = {key: value for key, value in options.items() if key != "required"}
        parser.add_argument(alias, **{**hidden, "dest": action.dest, "help": argparse.SUPPRESS,
                                      "default": argparse.SUPPRESS})
    return action


def is_alias(option: str) -> bool:
    """Whether ``option`` is a kebab-case alias (``--judge-seed``), not a canonical spelling."""
    return option.startswith("--") and "-" in option[2:]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with ``(default: X)`` unless it already says its default or has
    none worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default in (None, argparse.SUPPRESS, False) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"
