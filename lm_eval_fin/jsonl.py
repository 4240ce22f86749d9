"""Reading JSON Lines files the same way everywhere: blank lines skipped, a bad line named by
``file:line`` in the error, so a user can open the exact spot; and the model's answer in a
line of lm-eval's ``samples_<task>_<date>.jsonl``, for every reader of logged samples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path, error: type[Exception] = ValueError) -> Iterator[tuple[str, object]]:
    """``("file:line", value)`` for each non-blank line of ``path``; a line that is not JSON
    raises ``error("file:line: not JSON (...)")``."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: not JSON ({exc.msg})") from None


def answer_of(sample: dict[str, Any]) -> str:
    """The model's answer in a sample: ``filtered_resps`` (one entry per request, each the text
    or a one-element list), else ``resps``; "" when neither holds text.

    >>> answer_of({"resps": [["raw"]], "filtered_resps": ["filtered"]})
    'filtered'
    >>> answer_of({"resps": [[]]})
    ''
    """
    for key in ("filtered_resps", "resps"):
        value = sample.get(key)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return ""
