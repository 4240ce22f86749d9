"""The lm-eval task ``fin_toy``: a few questions with short answers (a JSON-lines file of
``{"id", "question", "answer"}``, given as ``--metadata '{"data_path": ...}'``), scored by exact
match and by the judge's verdict. ``tasks/fin_toy/utils.py`` re-exports what the YAML names."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.benchmarks.fin_toy import judge, metrics
from lm_eval_fin.benchmarks.fin_toy.view import VIEW
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.settings import RunSettings, Setting, optional, text
from lm_eval_fin.harness.stage import Judged, JudgeWork, judge_stage
from lm_eval_fin.harness.task import metric_values, require_data_path, scored_record

TASK = "fin_toy"
DATA_HINT = 'a JSON-lines file of {"id", "question", "answer"}'


def read_documents(path: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"id": str(row["id"]), "question": str(row["question"]), "reference": str(row["answer"])} for row in rows]


def _check_data(task: str, settings: RunSettings) -> None:
    read_documents(require_data_path(settings, DATA_HINT))


def load_dataset(**metadata: Any) -> dict:
    def documents(settings: RunSettings) -> tuple[list[dict], RunSettings]:
        return read_documents(require_data_path(settings, DATA_HINT)), settings

    return BENCHMARK.load(TASK, metadata, documents)


def normalised(answer: str) -> str:
    """Lower case, punctuation and extra spaces gone: "The AAPL." and "the aapl" are one answer."""
    return " ".join(re.sub(r"[^\w\s]", " ", answer.lower()).split())


def judge_documents(answers: Sequence[str], docs: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The filter stage: every answer judged in one batch, through the harness's judge stage."""
    items = list(zip(docs, answers))

    def run(judge_: Any, batch: Sequence[tuple[dict, str]]) -> list[Judged]:
        verdicts = judge.judge_answers([doc for doc, _ in batch], [answer for _, answer in batch], judge_,
                                       settings["max_attempts"])
        return [Judged({"judge": judge.judge_details(v, settings.judge)}, v.failed, v.unparsed, v.error,
                       v.usage.as_dict()) for v in verdicts]

    return judge_stage(settings, items, JudgeWork(
        run,
        unavailable=lambda batch, error: [{"judge": judge.judge_details(None, settings.judge, error)} for _ in batch],
        unjudged=lambda batch: [{"judge": judge.judge_details(None, None)} for _ in batch],
    ))


def process_results(doc: dict, results: Sequence[str]) -> dict[str, float]:
    record = scored_record(results)
    verdict = (record.get("judge") or {}).get("correct")
    values = {"exact_match": normalised(record["answer"]) == normalised(doc["reference"]), "judge_correct": verdict}
    return metric_values(RunSettings.from_json(doc["settings"]), values)


BENCHMARK = Benchmark(
    name=TASK,
    tasks=(TASK,),
    settings=(Setting("data_path", None, optional(text), DATA_HINT),),
    check_data=_check_data,
    score=judge_documents,
    metrics=metrics.METRICS,
    headline={TASK: metrics.HEADLINE},
    agreement=metrics.AGREEMENT,
    view=VIEW,
)
score_answers = BENCHMARK.filter_function()

__all__ = ["BENCHMARK", "load_dataset", "process_results", "score_answers"]
