"""lm-eval's own writes of a run, checked: every results and samples file written whole, or the
run kept elsewhere and said so.

lm-eval's ``EvaluationTracker`` catches any error while it writes ``results_<date>.json`` or
``samples_<task>_<date>.jsonl`` (a full disk, an ``--output_path`` that became a file, a folder
removed mid-run) and logs a warning: the command would exit 0 with the answers lost, leaving an
empty or cut file behind. While lm-eval runs, :func:`checked_saves` wraps the tracker's two
writers: after each, the file it should have written is read back (the results: one JSON
object; the samples: one whole line per sample). When one is not whole, the cut file is
removed, and the run (its results and every samples file, those written before included) is
written again by lm-eval's own writer under a folder of its own (:func:`keep_folder`), where
the rest of the run then goes too. What could not be written is one :class:`Unsaved` line for
the command to print before it exits with status 1.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin.plumbing import paths
from lm_eval_fin.text.cleantext import one_line

# the folder under the cache home where runs are kept that could not be written where asked
KEPT_FOLDER = "unsaved-runs"


@dataclass
class Unsaved:
    """Files of one run that lm-eval could not write whole under ``--output_path``."""

    missing: list[str] = field(default_factory=list)  # the files, as paths under --output_path
    reasons: list[str] = field(default_factory=list)  # lm-eval's errors, as it logged them
    kept: Path | None = None  # where the whole run was written instead (None: nowhere)

    def line(self) -> str:
        why = f" ({'; '.join(dict.fromkeys(self.reasons))})" if self.reasons else ""
        what = ", ".join(self.missing)
        if self.kept is not None:
            return (f"lm-eval could not write {what} whole{why}; the run's results and samples are kept under "
                    f"{self.kept}: score, report or move them from there")
        return (f"lm-eval could not write {what} whole{why}, nor a copy elsewhere; the answers of this run are lost "
                "(judge answers are in the judge cache: running the command again after freeing space asks the "
                "judge nothing it answered)")


def keep_folder() -> Path | None:
    """A new folder for a run that could not be written where asked: under the cache home,
    else the temporary folder; None when neither takes a folder."""
    for base in (paths.cache_home() / KEPT_FOLDER, Path(tempfile.gettempdir())):
        try:
            base.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix="run-", dir=base))
        except OSError:
            continue
    return None


def _run_folder(tracker: Any) -> Path:
    """The folder lm-eval writes the run's files in (its own rule: ``<output_path>/<model>``,
    or beside an ``--output_path`` ending in ``.json``)."""
    path = Path(tracker.output_path)
    return path.parent if path.suffix == ".json" else path / str(tracker.general_config_tracker.model_name_sanitized)


def _results_file(tracker: Any) -> Path:
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        return path.with_name(f"{path.stem}_{tracker.date_id}.json")
    return _run_folder(tracker) / f"results_{tracker.date_id}.json"


def _samples_file(tracker: Any, task: str) -> Path:
    return _run_folder(tracker) / f"samples_{task}_{tracker.date_id}.jsonl"


def results_whole(path: Path) -> bool:
    """Whether ``path`` holds one JSON object (a results file written whole)."""
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def samples_whole(path: Path, count: int) -> bool:
    """Whether ``path`` holds ``count`` whole lines (a samples file written whole: lm-eval
    writes one JSON line per sample, so a cut write leaves fewer newlines or a tail without one)."""
    try:
        with open(path, "rb") as handle:
            newlines, last = 0, b"\n"
            while chunk := handle.read(1 << 20):
                newlines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return False
    return newlines == count and last == b"\n"


def remove_cut(path: Path) -> None:
    """Remove a file lm-eval left cut or empty (it would read as a run that holds no samples),
    and its folder when that is left empty."""
    with contextlib.suppress(OSError):
        if path.is_file():
            path.unlink()
        path.parent.rmdir()  # only an empty one goes


class _Caught(logging.Filter):
    """lm-eval's errors while it writes, which it logs (a warning, then ``repr`` of the
    exception at INFO) instead of raising: kept for the command's one line, and not shown."""

    def __init__(self, shown_from: int) -> None:
        super().__init__()
        self.shown_from = shown_from  # the logger's level before: what it showed
        self.errors: list[str] = []
        self._reason_next = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and record.getMessage().startswith("Could not save"):
            self._reason_next = True
            return False
        if self._reason_next and record.levelno == logging.INFO:
            self._reason_next = False
            self.errors.append(one_line(record.getMessage(), 300))
            return False
        return record.levelno >= self.shown_from


@contextlib.contextmanager
def _catching(logger: logging.Logger) -> Iterator[_Caught]:
    """lm-eval's errors while it writes go to us, not the terminal: the command says in one
    line what was not written."""
    level = logger.level
    caught = _Caught(logger.getEffectiveLevel())
    logger.addFilter(caught)
    logger.setLevel(min(logging.INFO, caught.shown_from))  # the exception is logged at INFO
    try:
        yield caught
    finally:
        logger.removeFilter(caught)
        logger.setLevel(level)


@contextlib.contextmanager
def _no_cut_file_left(file: Callable[[], Path], samples: int | None) -> Iterator[None]:
    """A write interrupted (Ctrl-C, SIGTERM) leaves no cut file: it would block the next command."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            path = file()
            if not (results_whole(path) if samples is None else samples_whole(path, samples)):
                remove_cut(path)
        raise


@contextlib.contextmanager
def checked_saves() -> Iterator[list[Unsaved]]:
    """While the block runs lm-eval, its tracker's writes are checked; the list holds what
    could not be written where asked (empty when every file was written whole)."""
    from lm_eval.loggers import evaluation_tracker as module

    tracker_class = module.EvaluationTracker
    write_results = tracker_class.save_results_aggregated
    write_samples = tracker_class.save_results_samples
    unsaved: list[Unsaved] = []
    logger = module.eval_logger
    written: dict[int, list[Path]] = {}  # id(tracker) -> the files of its run written whole

    def record(tracker: Any, missing: Path, errors: list[str]) -> Unsaved:
        if not unsaved:
            unsaved.append(Unsaved())
        entry = unsaved[0]
        entry.missing.append(str(missing))
        entry.reasons.extend(errors)
        if entry.kept is None and not getattr(tracker, "_fin_kept", False):
            entry.kept = keep_folder()
        return entry

    def move_to(tracker: Any, entry: Unsaved) -> bool:
        """Point the tracker at the kept folder, with the files of its run written so far."""
        if entry.kept is None:
            return False
        if getattr(tracker, "_fin_kept", False):
            return True
        tracker.output_path = str(entry.kept)
        tracker._fin_kept = True
        folder = _run_folder(tracker)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path in written.get(id(tracker), []):
                shutil.copy2(path, folder / path.name)
        except OSError as exc:
            entry.reasons.append(one_line(exc, 300))
            entry.kept = None
            return False
        for path in written.get(id(tracker), []):  # the run is whole in one place, not split
            remove_cut(path)
        return True

    def save_results(self: Any, results: dict, samples: dict | None = None) -> None:
        before = getattr(self, "date_id", None)
        with _catching(logger) as caught, _no_cut_file_left(lambda: _results_file(self), None):
            write_results(self, results, samples)
        if not self.output_path:
            return
        path = _results_file(self) if getattr(self, "date_id", None) != before else None
        if path is not None and results_whole(path):
            written.setdefault(id(self), []).append(path)
            return
        missing = path or _run_folder(self) / "results_<date>.json"
        if path is not None:
            remove_cut(path)
        entry = record(self, missing, caught.errors)
        if move_to(self, entry):
            with _catching(logger):
                write_results(self, results, samples)
            if not results_whole(_results_file(self)):
                remove_cut(_results_file(self))
                entry.kept = None

    def save_samples(self: Any, task_name: str, samples: list) -> None:
        pristine = [dict(sample) for sample in samples]  # lm-eval rewrites some fields of each as it writes
        with _catching(logger) as caught, _no_cut_file_left(lambda: _samples_file(self, task_name), len(samples)):
            write_samples(self, task_name, samples)
        if not self.output_path:
            return
        path = _samples_file(self, task_name)
        if samples_whole(path, len(samples)):
            written.setdefault(id(self), []).append(path)
            return
        remove_cut(path)
        entry = record(self, path, caught.errors)
        if move_to(self, entry):
            with _catching(logger):
                write_samples(self, task_name, pristine)
            if not samples_whole(_samples_file(self, task_name), len(pristine)):
                remove_cut(_samples_file(self, task_name))
                entry.kept = None

    tracker_class.save_results_aggregated = save_results
    tracker_class.save_results_samples = save_samples
    try:
        yield unsaved
    finally:
        tracker_class.save_results_aggregated = write_results
        tracker_class.save_results_samples = write_samples
        for entry in unsaved:
            if entry.kept is not None and not any(entry.kept.iterdir()):
                shutil.rmtree(entry.kept, ignore_errors=True)
                entry.kept = None


def _name_max(folder: Path) -> int:
    """The longest file name, in bytes, the file system under ``folder`` takes."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def output_problems(output_path: str | os.PathLike | None, model_name: str | None,
                    flag: str = "--output_path") -> list[str]:
    """Why lm-eval could not write a run of ``model_name`` (lm-eval's name: ``pretrained=``
    and the like) under ``output_path``, found before any work: a file where lm-eval makes a
    folder (the output path itself, or the model's folder in it), or a folder name longer
    than the file system takes (lm-eval would make the folders above it, then fail, and the
    run would be lost at its end). Free space and write access are
    :func:`lm_eval_fin.plumbing.atomic.output_problem`'s to check."""
    from lm_eval.utils import sanitize_model_name

    if not output_path:
        return []
    path = Path(output_path).expanduser()
    if path.suffix == ".json":
        return [] if not path.parent.exists() or path.parent.is_dir() else \
            [f"{flag} {output_path}: {path.parent} is a file, not a folder"]
    if path.exists() and not path.is_dir():
        return [f"{flag} {output_path} is a file: lm-eval writes a folder of results there; name a folder (a new "
                "one is made) or a file name ending in .json"]
    folder = path / sanitize_model_name(model_name) if model_name else path
    if folder.exists() and not folder.is_dir():
        return [f"{flag} {output_path}: {folder} is a file where lm-eval makes the model's folder; move it away"]
    limit = _name_max(_nearest_existing(folder))
    for part in folder.parts:
        size = len(os.fsencode(part))
        if size > limit:
            return [f"{flag} {output_path}: the folder name {part[:40]!r}... is {size} bytes, longer than the {limit} "
                    "this file system takes; lm-eval names the run's folder after the model (pretrained=...): "
                    "give a shorter --output_path or model path"]
    return []


def model_name(model_args: Any) -> str | None:
    """The name lm-eval gives the run's folder, from its ``--model_args`` (its own rule)."""
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker

    return GeneralConfigTracker._get_model_name(model_args)
