"""Reading JSON Lines files the same way everywhere: blank lines skipped, a bad line named by
``file:line`` in the error, so a user can open the exact spot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


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
                raise error(f"{where}: not JSON ({exc})") from None
