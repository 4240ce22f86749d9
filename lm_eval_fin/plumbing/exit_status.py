"""Exit statuses of every ``lm-eval-fin`` command, one meaning each (README, "Exit status"),
and the problems that keep a command from starting.

A judge failure is never a score: a command that finished but left work unjudged says so in
its status, after it has written what it could.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from lm_eval_fin.text.cleantext import one_line

OK = 0
# finished and wrote its results, but some of the work is missing from them: the judge failed
# on (or could not read) some of it, some runs could not be read, a needed part is absent
INCOMPLETE = 1
USAGE = 2  # did not start: bad arguments, data, settings or judge configuration (one line says which)
JUDGE_CACHE = 3  # the judge cache cannot be used (the message names the file and the fix)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it: one line says what is kept (interrupts.py)
TERMINATED = 143  # SIGTERM (128 + SIGTERM), the same


@dataclass(frozen=True)
class Problem:
    """Why a command cannot start, in one line (``file:line`` first where there is one), and
    the status that says which kind of problem it is."""

    message: str
    status: int = USAGE


def report(prog: str, problems: Sequence[Problem]) -> int:
    """Print every problem, one line each (``<prog>: error: <message>``), and return the
    command's status: :data:`USAGE` when any problem is one, :data:`JUDGE_CACHE` when the
    cache is all that is wrong, :data:`OK` for none."""
    for problem in problems:
        print(f"{prog}: error: {one_line(problem.message, 1000)}", file=sys.stderr)
    if not problems:
        return OK
    return USAGE if any(p.status == USAGE for p in problems) else max(p.status for p in problems)
