"""Model output as text every parser and metric can read safely, whatever the model wrote.

A sample's answer is untrusted: it may be bytes, hold lone surrogates (which make a UTF-8
write raise), NUL and other control characters, terminal escape sequences, or megabytes of
repetition. :func:`read_answer` turns any value into bounded, printable text: the parsers and
metrics of the package read at most :data:`MAX_ANSWER_CHARS` characters of an answer (the
first ones; a task counts the answers it cut in ``truncated_answers``), so one hostile answer
costs bounded time and memory and never the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# The first 200k characters of an answer are read: fifty times the longest answer a
# benchmark asks for (fin_lfqa's 2048 tokens), and bounded work for every parser.
MAX_ANSWER_CHARS = 200_000

# ANSI/ECMA-48 escape sequences: CSI (ESC [ or the C1 byte 0x9b), OSC/DCS/SOS/PM/APC strings
# with their terminator (BEL, ESC \ or the C1 ST) on the same line, and two-byte ESC
# sequences. A string left unterminated on its line loses only its introducer (below, or as a
# control): a stray C1 byte in mis-decoded text must not swallow the lines after it up to a
# stray BEL.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -~]?"
)
# C0 controls but tab and newline (carriage returns become newlines first), DEL, C1 controls,
# bidirectional overrides and isolates (which make a terminal show text out of its order)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_CARRIAGE_RETURNS = re.compile(r"\r\n?")


def as_text(value: object) -> str:
    """Inputs other than text are read, not rejected: None is empty, bytes are decoded
    (undecodable bytes replaced), anything else is its ``str``.

    >>> as_text(None), as_text(b"caf\\xc3\\xa9"), as_text(12)
    ('', 'café', '12')
    """
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else str(value)


def printable(text: object) -> str:
    """``text`` without escape sequences, control characters (tab and newline kept; line ends
    written with carriage returns become newlines) and lone surrogates (replaced by U+FFFD), so
    that it can be written as UTF-8 and shown on a terminal.
    Server-controlled text (error bodies, refusals) goes through this before it is logged.

    >>> printable("a\\x1b[31mred\\x1b[0m\\x00b\\ud800\\r\\nc")
    'aredb\\ufffd\\nc'
    """
    text = _CARRIAGE_RETURNS.sub("\n", _SURROGATES.sub("\ufffd", as_text(text)))
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def one_line(text: object, limit: int = 300) -> str:
    """:func:`printable` text on one line (whitespace runs collapsed), cut at ``limit``.

    >>> one_line("HTTP 500:\\n  \\x1b[1mboom\\x1b[0m", limit=12)
    'HTTP 500:...'
    """
    line = " ".join(printable(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_answer(value: object, limit: int = MAX_ANSWER_CHARS) -> tuple[str, bool]:
    """(the first ``limit`` characters of ``value`` as printable text, whether it was cut).

    >>> read_answer("x" * 5, limit=3)
    ('xxx', True)
    """
    text = as_text(value)
    cut = len(text) > limit
    return printable(text[:limit] if cut else text), cut


def writable(value: object) -> object:
    """``value`` with the lone surrogates of its strings replaced by U+FFFD, at any depth of
    lists, tuples and dicts, and nothing else changed: what a UTF-8 (Arrow) writer accepts.

    >>> writable({"a": ["x\\ud800", 1]})
    {'a': ['x\\ufffd', 1]}
    """
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, (list, tuple)):
        return type(value)(writable(item) for item in value)
    if isinstance(value, dict):
        return {key: writable(item) for key, item in value.items()}
    return value


def _writable_kwargs(kwargs: Mapping[str, object]) -> dict[str, object]:
    return {key: writable(value) for key, value in kwargs.items()}


class WritableInputs:
    """A mixin for ``evaluate`` modules (put it before ``evaluate.Metric``): evaluate writes
    every input to an Arrow file before ``_compute`` sees it, and one lone surrogate in one
    answer makes that write raise for the whole batch. Inputs pass :func:`writable` first, so
    any ``str`` is accepted and costs at most its own document's score, as in the tasks."""

    # evaluate appends the module's inputs description to these docstrings
    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (lone surrogates replaced)."""
        return super().add_batch(  # type: ignore[misc]
            predictions=writable(predictions), references=writable(references), **_writable_kwargs(kwargs)
        )

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and reference (lone surrogates replaced)."""
        return super().add(  # type: ignore[misc]
            prediction=writable(prediction), reference=writable(reference), **_writable_kwargs(kwargs)
        )
