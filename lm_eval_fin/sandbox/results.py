"""What a snippet's run comes to (:class:`ExecResult`), and the code execution rate and
failure shares over many (:func:`code_exec_rate`, :func:`failure_categories`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .child.snippet import FAILURE_CATEGORIES


class SandboxError(RuntimeError):
    """The sandbox itself could not start (before any snippet code ran): a broken
    environment or limits too tight for the interpreter, never something a snippet did."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one snippet.

    ``ok``: the function ran and returned something other than None. ``value``: repr of
    that return value (cut to
    :data:`~lm_eval_fin.sandbox.runner.MAX_TEXT_CHARS`), None otherwise. ``error``: why it
    failed, None when ``ok``. ``output``: what the snippet printed (stdout and stderr
    together, up to ``max_output_bytes``). ``duration_s``: wall-clock seconds, child
    start-up included. ``category``: why it failed, one of :data:`FAILURE_CATEGORIES`
    (None when ``ok``):

    - ``syntax``: it does not compile (syntax or indentation error, NUL bytes, not text);
    - ``no_function``: it defines no function;
    - ``missing_arguments``: every function it defines needs arguments, so the call fails;
    - ``exception``: its code raised, or its process ended without a result;
    - ``none_result``: the function returned None;
    - ``generator``: it returned a generator or coroutine (its body has not run);
    - ``refused``: the sandbox refused something it tried (a file outside its folder, a
      process, a socket, ``ctypes``, a thread);
    - ``resource``: memory, disk, file size, open files or output past the limits;
    - ``timeout``: wall-clock or CPU time.
    """

    ok: bool
    value: str | None = None
    error: str | None = None
    output: str = ""
    duration_s: float = 0.0
    category: str | None = None


def code_exec_rate(results: Iterable[ExecResult]) -> float:
    """Share of snippets that ran (micro over all snippets). No snippets at all: 0.0, since
    a model that wrote no code earned no credit; report the snippet count beside it."""
    results = list(results)
    return sum(result.ok for result in results) / len(results) if results else 0.0


def failure_categories(results: Iterable[ExecResult]) -> dict[str, float]:
    """Share of all snippets that failed in each category (:data:`FAILURE_CATEGORIES`),
    keyed ``code_<category>``, every category present. With :func:`code_exec_rate` the
    shares add up to 1. No snippets: every share 0.0, as the rate. A failure without a
    category (an :class:`ExecResult` made by hand) counts as ``exception``."""
    results = list(results)
    counts = dict.fromkeys(FAILURE_CATEGORIES, 0)
    for result in results:
        if not result.ok:
            category = result.category if result.category in counts else "exception"
            counts[category] += 1
    return {f"code_{name}": count / len(results) if results else 0.0 for name, count in counts.items()}

