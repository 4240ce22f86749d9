"""The column types of lm-eval's samples files, for reading several runs as one ``datasets`` set.

``datasets.load_dataset("json", data_files=[...])`` types every column by its first file and
casts the others to it: a metric that the first run leaves out of every line (a judge metric in
a run without a judge) or an all-null column then stops the load (``Couldn't cast array of type
double to null``). With the types declared, ``datasets`` adds a column a file lacks as nulls::

    files = [...]  # samples_<task>_<date>.jsonl of several runs of one task
    datasets.load_dataset("json", data_files=files, features=samples_features(files))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

METRIC_TYPE = "float64"  # process_results gives floats (a bool counts 1.0 or 0.0)


def samples_features(paths: Sequence[str | Path]) -> Any:
    """``datasets.Features`` of the union of the files' columns: each metric a line names in
    lm-eval's ``metrics`` field as float64, every other column as the first file that holds a
    value in it types it."""
    import datasets
    import pyarrow.json

    metrics: set[str] = set()
    columns: dict[str, Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    metrics.update(json.loads(line).get("metrics") or [])
        for name, feature in datasets.Features.from_arrow_schema(pyarrow.json.read_json(path).schema).items():
            if name not in columns or _is_null(columns[name]):
                columns[name] = feature
    return datasets.Features({name: datasets.Value(METRIC_TYPE) if name in metrics else feature
                              for name, feature in columns.items()})


def _is_null(feature: Any) -> bool:
    return getattr(feature, "dtype", None) == "null"
