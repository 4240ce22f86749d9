"""lm-eval output folders of ``--predict_only --log_samples`` runs, written by hand as lm-eval
writes them, for the tests of ``lm-eval-fin score``: a results file whose only figure is
lm-eval's ``bypass``, and a samples file whose documents are those the task's own loader gives
(with the run's settings) and whose filtered responses are the records the filter stage keeps
without scoring."""

from __future__ import annotations

import json
from pathlib import Path

from lm_eval_fin import records
from lm_eval_fin.benchmarks.fin_lfqa import task as lfqa
from tests.finlfqa_fixtures import hub_record, hub_records, write_hub_fixture

DATE = "2025-01-02T03-04-05.678901"
MODEL = "my/model"  # lm-eval's folder for it: my__model


def lfqa_documents(folder: Path, count: int = 2) -> list[dict]:
    """``count`` fin_lfqa documents of the hub fixture as the task's loader gives them."""
    extra = [hub_record(id=f"cwt-awk-{number}") for number in range(3, count + 1)]
    data = write_hub_fixture(folder / "finlfqa.jsonl", [*hub_records(), *extra][:count])
    return list(lfqa.load_validation(data_path=str(data), bertscore_model="offline", judge="none")["validation"])


def predict_only_sample(doc_id: int, doc: dict, answer: str) -> dict:
    """One line as lm-eval's EvaluationTracker writes it for a --predict_only run of our tasks."""
    return {
        "doc_id": doc_id, "doc": doc, "target": "", "arguments": {"gen_args_0": {"arg_0": "prompt", "arg_1": {}}},
        "resps": [[answer]], "filtered_resps": [records.encode(answer, {"truncated_answer": False, "trace": None})],
        "filter": "none", "metrics": ["bypass"], "doc_hash": f"d{doc_id}", "prompt_hash": "p", "target_hash": "t",
        "bypass": None,
    }


def write_samples(folder: Path, task: str, samples: list[dict], date: str = DATE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{date}.jsonl"
    path.write_text("".join(json.dumps(sample) + "\n" for sample in samples), encoding="utf-8")
    return path


def write_predict_only_run(root: Path, task: str, docs: list[dict], answers: list[str], date: str = DATE) -> Path:
    """The run's samples and results files under ``root/my__model/``; the samples file."""
    folder = root / MODEL.replace("/", "__")
    path = write_samples(folder, task, [predict_only_sample(i, doc, a) for i, (doc, a) in enumerate(zip(docs, answers))],
                         date)
    results = {
        "results": {task: {"alias": task, "bypass,none": 999, "bypass_stderr,none": "N/A"}},
        "configs": {task: {"task": task}}, "versions": {task: 3.0}, "n-shot": {task: 0},
        "config": {"model": "hf", "model_args": f"pretrained={MODEL}"}, "model_name": MODEL,
    }
    (folder / f"results_{date}.json").write_text(json.dumps(results), encoding="utf-8")
    return path
