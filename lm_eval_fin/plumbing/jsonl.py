"""Reading JSON Lines files the same way everywhere: blank lines skipped, a bad line named by
``file:line`` in the error, so a user can open the exact spot."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path


def read_jsonl(path: str | Path, error: type[Exception] = ValueError) -> Iterator[tuple[str, object]]:
    """``("file:line", value)`` for each non-blank line of ``path``; a line that is not UTF-8
    text or not JSON raises ``error("file:line: ...")``, so the message says where to look.

    A file that cannot be opened raises OSError as usual (FileNotFoundError names the path)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            line = decoded(raw, where, error)
            if not line.strip():
                continue
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: not JSON ({json_problem(exc)})") from None


def json_problem(exc: json.JSONDecodeError) -> str:
    """json's reason and the column, as one phrase (its messages "... at" want the place).

    >>> json_problem(json.JSONDecodeError("Invalid control character at", '"a\\x01"', 2))
    'Invalid control character at column 3'
    >>> json_problem(json.JSONDecodeError("Expecting value", "x", 0))
    'Expecting value, column 1'
    """
    return f"{exc.msg} column {exc.colno}" if exc.msg.endswith(" at") else f"{exc.msg}, column {exc.colno}"


def decoded(raw: bytes, where: str, error: type[Exception] = ValueError) -> str:
    """``raw`` (one line) as UTF-8 text; ``error`` naming ``where`` and the first bad byte otherwise.

    >>> decoded(b"caf\\xe9", "data.jsonl:3")
    Traceback (most recent call last):
    ...
    ValueError: data.jsonl:3: not UTF-8 text (byte 0xe9 at column 4); save the file as UTF-8
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(_not_utf8(where, raw, exc.start)) from None


def read_text(path: str | Path, error: type[Exception] = ValueError) -> str:
    """The UTF-8 text of the file ``path``; ``error("file:line: not UTF-8 text ...")`` otherwise."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(_not_utf8(f"{path}:{line}", raw[start:], exc.start - start)) from None


def _not_utf8(where: str, line: bytes, offset: int) -> str:
    return f"{where}: not UTF-8 text (byte 0x{line[offset]:02x} at column {offset + 1}); save the file as UTF-8"



def check_unique_ids(located: Iterable[tuple[str, str]], error: type[Exception] = ValueError, name: str = "id",
                     need: str = "its own id") -> None:
    """Each ``(id, "file:line")`` once: a repeated id raises ``error`` naming both places."""
    first: dict[str, str] = {}
    for identifier, where in located:
        earlier = first.setdefault(identifier, where)
        if earlier != where:
            raise error(f"{where}: {name} {identifier!r} again (first at {earlier}); each record needs {need}")
