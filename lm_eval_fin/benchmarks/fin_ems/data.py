"""The earnings-call dataset of fin_ems: its format, written by ``lm-eval-fin build
earnings-call`` (:mod:`lm_eval_fin.builders.earnings_call`) and read by the task.

One record per transcript and question, kept as JSON Lines (``earnings_call_qa.jsonl``) and
as a ``datasets`` folder (``hf_dataset/``, ``save_to_disk``):

    id              "<TICKER>-<call date>-<question id>"
    company         company name
    ticker          upper-case ticker
    call_date       ISO date the call was held
    fiscal_period   the source's fiscal label, e.g. "FY2025 Q1" (informative only; "" if none)
    question_id     "q1".."q5"
    question        one of the EMS paper's five questions (lm_eval_fin/data/ems_questions.json)
    transcript      the whole transcript text
    reference       the reference answer
    provenance      how the reference was made: source, answerer and consolidator specs, their
                    decoding, prompt hashes, build time, lm-eval-fin version

``id``, ``question``, ``transcript`` and ``reference`` are required (text); the rest may be
absent in a dataset made by other means.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lm_eval_fin.plumbing import atomic
from lm_eval_fin.plumbing.jsonl import check_unique_ids, read_jsonl

JSONL_NAME = "earnings_call_qa.jsonl"
DISK_NAME = "hf_dataset"
REQUIRED_FIELDS = ("id", "question", "transcript", "reference")
EXPECTED = (
    f"a dataset made by `lm-eval-fin build earnings-call`: its {JSONL_NAME}, its {DISK_NAME}/ folder "
    f"or the output folder holding them; records need text fields {', '.join(REQUIRED_FIELDS)}"
)


class DatasetError(ValueError):
    """A dataset that is not in the earnings-call format; the message says what is expected."""


def write_dataset(records: Sequence[dict], out_dir: str | Path) -> tuple[Path, Path]:
    """``<out_dir>/earnings_call_qa.jsonl`` and ``<out_dir>/hf_dataset`` (save_to_disk)."""
    import datasets

    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / JSONL_NAME
    with atomic.open_text(jsonl) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    disk = out / DISK_NAME
    with atomic.folder(disk) as building:
        datasets.Dataset.from_list(list(records)).save_to_disk(str(building))
    return jsonl, disk


def read_dataset(data_path: str | Path) -> list[dict]:
    """Records of a built dataset: its JSONL file, its ``save_to_disk`` folder, or the
    builder's output folder holding either. :class:`DatasetError` names what is wrong."""
    path = Path(data_path).expanduser()
    if path.is_dir() and not (path / "state.json").is_file() and not (path / "dataset_dict.json").is_file():
        if (path / DISK_NAME).is_dir():
            path = path / DISK_NAME
        else:
            candidates = sorted(path.glob("*.jsonl"))
            if not candidates:
                raise DatasetError(f"{path} holds no dataset; expected {EXPECTED}")
            path = candidates[0]
    if path.is_dir():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            split = "test" if "test" in loaded else next(iter(loaded))
            loaded = loaded[split]
        located = [(f"{path}: record {number}", record) for number, record in enumerate(loaded, start=1)]
    elif path.is_file():
        try:
            located = list(read_jsonl(path, DatasetError))
        except DatasetError as exc:
            raise DatasetError(f"{exc}; expected {EXPECTED}") from None
    else:
        raise DatasetError(f"data_path {str(path)!r} does not exist; expected {EXPECTED}")
    for where, record in located:
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: a {type(record).__name__}, not an object; expected {EXPECTED}")
        missing = [name for name in REQUIRED_FIELDS if name not in record]
        not_text = [name for name in REQUIRED_FIELDS if name in record and not isinstance(record[name], str)]
        if missing or not_text:
            problems = [f"no {', '.join(missing)}"] if missing else []
            problems += [f"{name} is a {type(record[name]).__name__}, not text" for name in not_text]
            raise DatasetError(f"{where}: {'; '.join(problems)}; expected {EXPECTED}")
    # ids pair each answer with its question across runs (the report, score)
    check_unique_ids(((record["id"], where) for where, record in located), DatasetError)
    if not located:
        raise DatasetError(f"{path} holds no records; expected {EXPECTED}")
    return [record for _, record in located]
