"""`make bench`: run every bench/bench_*.py and print one table (figure, ours, peer or limit, ratio).

Each benchmark module exposes ``run() -> list[dict]`` with keys figure, ours, peer, ratio, unit
and note; every ratio is measured in the same run on the same inputs. A module that fails is
reported in the table with its error, and the others still run.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def main(names: list[str]) -> int:
    rows, failed = [], 0
    for path in sorted(HERE.glob("bench_*.py")):
        if names and path.stem not in names:
            continue
        start = time.perf_counter()
        try:
            found = _load(path).run()
        except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            failed += 1
            traceback.print_exc()
            found = [{"figure": path.stem, "note": f"FAILED: {type(exc).__name__}: {exc}"}]
        print(f"{path.stem}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        rows += found
    header = ("figure", "ours", "peer or limit", "ratio", "unit", "note")
    table = [header] + [
        (r.get("figure", ""), _fmt(r.get("ours")), _fmt(r.get("peer")), _fmt(r.get("ratio")), r.get("unit", ""), r.get("note", ""))
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("| " + " | ".join(str(cell).ljust(w) for cell, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
