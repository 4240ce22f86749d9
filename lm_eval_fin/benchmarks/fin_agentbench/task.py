"""The lm-eval tasks ``fin_agentbench_doc`` and ``fin_agentbench_chunk`` (group ``fin_agentbench``).

``tasks/fin_agentbench/utils.py`` re-exports the functions the YAMLs name. Metadata:
``data_path`` (a challenge file or a folder of them; required, there is no hub copy) and
``gain`` (``exponential``, the default, or ``linear``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench import data
from lm_eval_fin.benchmarks.fin_agentbench.score import score_answer
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.settings import RunSettings, Setting, one_of, optional, text
from lm_eval_fin.harness.task import as_dataset, require_data_path
from lm_eval_fin.ranking import GAINS

# task -> (challenge file kind, ranking depth k)
TASKS = {"fin_agentbench_doc": ("document", 5), "fin_agentbench_chunk": ("chunk", 10)}
DATA_HINT = f"{data.EXPECTED}. There is no hub copy; see the fin_agentbench task README for where the files are"


def _records(task: str, settings: RunSettings) -> list[dict]:
    return data.load_records(require_data_path(settings, DATA_HINT), TASKS[task][0])


def _load(task: str, metadata: dict[str, Any]) -> dict:
    settings = BENCHMARK.read_settings(task, metadata)
    documents = data.to_documents(_records(task, settings), with_labels=TASKS[task][0] == "document")
    return as_dataset("test", documents, settings)


def load_document_ranking(**metadata: Any) -> dict:
    return _load("fin_agentbench_doc", metadata)


def load_chunk_ranking(**metadata: Any) -> dict:
    return _load("fin_agentbench_chunk", metadata)


def _process(task: str, doc: dict, results: Sequence[str]) -> dict[str, float]:
    settings = RunSettings.from_json(doc["settings"])
    return score_answer(doc, results[0], k=TASKS[task][1], gain=settings["gain"])


def process_results_doc(doc: dict, results: Sequence[str]) -> dict[str, float]:
    return _process("fin_agentbench_doc", doc, results)


def process_results_chunk(doc: dict, results: Sequence[str]) -> dict[str, float]:
    return _process("fin_agentbench_chunk", doc, results)


BENCHMARK = Benchmark(
    name="fin_agentbench",
    tasks=tuple(TASKS),
    settings=(
        Setting("data_path", None, optional(text), "a challenge JSONL file or a folder of them"),
        Setting("gain", "exponential", one_of(*GAINS), "nDCG gain: exponential (2^g - 1) or linear (g)"),
    ),
    check_data=_records,
)
