"""Ctrl-C and SIGTERM end a command with one line, never a traceback.

Either may come anywhere: while lm-eval generates, while a judge is asked, while files are
written. The work kept is the same in every case (files are written whole or not at all, judge
answers are in the judge cache as they arrive), so the line says what that means for the
command interrupted and how to resume. Ctrl-C exits with status 130 and SIGTERM with 143, as
a shell reports a process ended by those signals.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from lm_eval_fin.plumbing.exit_status import INTERRUPTED, TERMINATED

_CACHED = "the judge answers received so far are kept in the judge cache ({cache})"
# what is kept, by command; the default for the rest
_KEPT = {
    "run": "lm-eval writes a run's files only at its end, so none were written for this one; " + _CACHED
    + ": run the same command again to resume (the judge is asked nothing it answered; generated answers are "
    "made again unless lm-eval's --use_cache is given)",
    "score": "the logged answers are untouched and no scored file was left half written; " + _CACHED
    + ": run the same command again to resume",
    "rerank": "no file was left half written; " + _CACHED + ": run the same command again to resume",
    "demo": "no file was left half written; " + _CACHED + ": run the same command again to resume",
}
_DEFAULT_KEPT = "every file is written whole or not at all, so none was left half written: run the same command again"


class Terminated(BaseException):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (a BaseException,
    so no ``except Exception`` on the way swallows it)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def kept_line(command: str | None, cache: object) -> str:
    """What an interrupted ``command`` kept (``cache``: the judge cache's path) and how to resume it."""
    return _KEPT.get(command or "", _DEFAULT_KEPT).format(cache=cache)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` in the main thread (called from
    another thread, where no handler can be set, it changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_interruptible(command: str | None, body: Callable[[], int], cache: Callable[[], object]) -> int:
    """``body()``'s status; on Ctrl-C or SIGTERM, one line on stderr saying what is kept
    (``cache()``: where the judge cache is) and how to resume, and status 130 or 143."""
    try:
        with sigterm_raises():
            return body()
    except KeyboardInterrupt:
        status, what = INTERRUPTED, "interrupted (Ctrl-C)"
    except Terminated:
        status, what = TERMINATED, "terminated (SIGTERM)"
    prog = f"lm-eval-fin {command}" if command else "lm-eval-fin"
    with _signals_ignored():
        print(f"{prog}: {what}: {kept_line(command, cache())}", file=sys.stderr, flush=True)
    return status


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second Ctrl-C or SIGTERM while the line is printed is ignored: it is printed once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
