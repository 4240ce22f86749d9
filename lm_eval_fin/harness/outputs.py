"""Where a task writes its own files (per-document details) beside lm-eval's output.

lm-eval does not tell a task where its output goes (``--output_path`` reaches only its
tracker), so whoever starts lm-eval sets ``$LM_EVAL_FIN_DETAILS_DIR``:
:func:`set_details_dir_from_argv` does it from lm-eval's arguments (``lm-eval-fin run`` calls
it), giving ``<output_path>/ems_details``. Without the variable, the folder is
``<cache home>/ems_details``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin import paths

DETAILS_ENV = "LM_EVAL_FIN_DETAILS_DIR"
DETAILS_FOLDER = "ems_details"


def details_dir() -> Path:
    """``$LM_EVAL_FIN_DETAILS_DIR``, else ``<cache home>/ems_details``."""
    override = os.environ.get(DETAILS_ENV)
    return Path(override).expanduser() if override else paths.cache_home() / DETAILS_FOLDER


def details_dir_for_output(output_path: str | os.PathLike) -> Path:
    """The details folder next to lm-eval's output: ``<output_path>/ems_details``, or beside
    the file when ``output_path`` names a ``.json`` file (lm-eval then writes its results and
    samples next to that file)."""
    path = Path(output_path).expanduser().absolute()
    return (path.parent if path.suffix == ".json" else path) / DETAILS_FOLDER


def output_path_of(argv: Sequence[str]) -> str | None:
    """lm-eval's ``--output_path``/``-o`` in ``argv``, or None."""
    output_path = None
    for index, arg in enumerate(argv):
        if arg in ("--output_path", "-o") and index + 1 < len(argv):
            output_path = argv[index + 1]
        elif arg.startswith("--output_path="):
            output_path = arg.split("=", 1)[1]
        elif arg.startswith("-o") and not arg.startswith("--") and len(arg) > 2:
            output_path = arg[2:].removeprefix("=")
    return output_path or None


def set_details_dir_from_argv(argv: Sequence[str], environ: Any = None) -> Path | None:
    """Set ``$LM_EVAL_FIN_DETAILS_DIR`` from lm-eval's ``--output_path`` in ``argv`` when the
    variable is unset; the folder the details will go to, or None when ``argv`` names no
    output path (the variable, or the cache default, then applies)."""
    environ = os.environ if environ is None else environ
    output_path = output_path_of(argv)
    if output_path is None:
        return None
    if not environ.get(DETAILS_ENV):
        environ[DETAILS_ENV] = str(details_dir_for_output(output_path))
    return Path(environ[DETAILS_ENV]).expanduser()
