"""The one "did you mean" of every message that names a typo: a task, a flag, a metadata key."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence


def did_you_mean(given: Sequence[str], known: Iterable[str], show: Callable[[str], str] = repr) -> str:
    """``did you mean X?`` for the names of ``given`` that are close to a known one: the known
    name alone when one name was given, ``X for Y`` pairs when several were; ``""`` when none
    is close. ``show`` writes a name (quoted by default; ``str`` for a flag).

    >>> did_you_mean(["fin_lfq"], ["fin_lfqa", "fin_ems"])
    "did you mean 'fin_lfqa'?"
    >>> did_you_mean(["fin_lfq", "fin_em", "zzz"], ["fin_lfqa", "fin_ems"])
    "did you mean 'fin_lfqa' for 'fin_lfq', 'fin_ems' for 'fin_em'?"
    >>> did_you_mean(["--judge-seed"], ["--judge_seed"], show=str), did_you_mean(["zzz"], ["fin_ems"])
    ('did you mean --judge_seed?', '')
    """
    candidates = list(known)
    close = {name: found[0] for name in given if (found := difflib.get_close_matches(name, candidates, n=1))}
    if not close:
        return ""
    if len(given) == 1:
        return f"did you mean {show(next(iter(close.values())))}?"
    return f"did you mean {', '.join(f'{show(to)} for {show(name)}' for name, to in close.items())}?"
