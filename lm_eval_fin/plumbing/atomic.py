"""Files written whole or not at all, for every file the package writes.

A write is made to a temporary file in the target's folder, flushed to disk, and renamed over
the target (``os.replace``, atomic on POSIX): a reader sees the old file or the new one, and a
write that fails half way (a full disk, a kill) leaves the old file, or none, never a
truncated one. A folder (a ``save_to_disk`` dataset) is built beside its target and swapped
in the same way.

    with open_text(path) as out:      # a file written line by line
        for row in rows:
            out.write(json.dumps(row) + "\\n")
    write_text(path, text)            # a file written at once

:func:`output_problem` asks, before any work, whether files can be written where a command
will write them (a folder that takes writes, with free space).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

# The least free space a command that writes results wants where it writes them: room for a
# run's results, samples and details files (``lm-eval-fin run`` adds room for its data).
MIN_FREE_BYTES = 64 * 2**20


def _mode_for(path: Path, default: int = 0o666) -> int:
    """The mode the new file (or folder) gets: the old one's, else what ``open`` or ``mkdir``
    would give (``default`` less the umask; ``mkstemp`` and ``mkdtemp`` make theirs private)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return default & ~umask


@contextlib.contextmanager
def open_text(path: str | os.PathLike, newline: str | None = None) -> Iterator[TextIO]:
    """A UTF-8 text handle whose content replaces ``path`` when the block ends without an
    exception; on an exception (a full disk included) ``path`` is left as it was."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline=newline) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())  # the data is on disk before the rename makes it the file
        os.chmod(temporary, _mode_for(path))
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        if exc.filename is None:  # a failed write names no file: say which one it was
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str, newline: str | None = None) -> None:
    """``text`` as the whole content of ``path``, written atomically (:func:`open_text`)."""
    with open_text(path, newline=newline) as out:
        out.write(text)


@contextlib.contextmanager
def folder(path: str | os.PathLike) -> Iterator[Path]:
    """A new, empty folder beside ``path``; when the block ends without an exception it takes
    the place of ``path`` (the old folder is removed after the swap), else it is removed and
    ``path`` is left as it was."""
    path = Path(path)
    built = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield built
        os.chmod(built, _mode_for(path, 0o777))
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            os.replace(path, old / path.name)
            os.replace(built, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(built, path)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise



def _existing_folder(path: Path) -> Path:
    """The nearest part of ``path`` that exists (itself, or the closest ancestor)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def output_problem(output_path: str | os.PathLike | None, needed_bytes: int = MIN_FREE_BYTES,
                   flag: str = "--output_path") -> str | None:
    """Why files could not be written under ``output_path`` (a folder, or a file in one):
    the nearest existing part of it is a file, its folder cannot be written, or it has less
    than ``needed_bytes`` free (statvfs: nothing is written to find out). None when they can,
    or when ``output_path`` is None. Asked before any work, so a full disk is known at once."""
    if not output_path:
        return None
    path = Path(output_path).expanduser()
    folder = _existing_folder(path)
    if folder == path and path.is_file():
        folder = path.parent
    if not folder.is_dir():
        return f"{flag} {output_path}: {folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{flag} {output_path}: {folder} cannot be written; choose another {flag}"
    free = shutil.disk_usage(folder).free
    if free < needed_bytes:
        return (f"{flag} {output_path}: {free / 2**20:.0f} MiB free on {folder}, less than the "
                f"{needed_bytes / 2**20:.0f} MiB the results may need; free some space or write elsewhere")
    return None


def output_folder_problem(output_path: str | os.PathLike | None, flag: str = "--output_path") -> str | None:
    """:func:`output_problem` for a command that writes a folder of files (``report``,
    ``export``, ``agreement``): an existing file there is a problem too. Asked before any work."""
    if output_path and Path(output_path).expanduser().is_file():
        return f"{flag} {output_path} is a file; name a folder (a new one is made)"
    return output_problem(output_path, flag=flag)
