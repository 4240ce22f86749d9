"""``lm-eval-fin report``: many lm-eval runs on one page: one row per model with its headline
figures, intervals and standings, baselines and the papers' figures beside them, per-benchmark
metrics, diagnostics, every answer and the provenance. :func:`write_report` is the entry point
for code.

The names below load on first use, so that a benchmark's view (which imports the report's
building blocks) does not load the templates and the statistics with its task.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Report": "build", "build_report": "build", "write_report": "build", "write_report_files": "build"}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
