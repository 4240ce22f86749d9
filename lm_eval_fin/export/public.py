"""What leaves the machine names files, never where they were here: every absolute local path
in an export's text cut to its last part (a data file, a model folder, a judge's folder)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# an absolute local path (or ~/...) of two parts or more, not part of a URL or a word
LOCAL_PATH = re.compile(r"(?<![\w.~/-])~?/(?!/)(?:[\w.@+-]+/)+[\w.@+-]*")


def public_text(text: str) -> str:
    """``text`` with every absolute local path cut to its last part: what leaves the machine
    names files, never where they were here.

    >>> public_text("hf:/home/ann/models/fin#fin.Q4.gguf, see http://127.0.0.1:8000/v1")
    'hf:fin#fin.Q4.gguf, see http://127.0.0.1:8000/v1'
    """
    return LOCAL_PATH.sub(lambda found: Path(found[0]).name or "(a local folder)", text)


def public(value: Any) -> Any:
    """``value`` (JSON-like) with :func:`public_text` applied to every string in it, keys too."""
    if isinstance(value, str):
        return public_text(value)
    if isinstance(value, dict):
        return {public(key): public(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [public(item) for item in value]
    return value
