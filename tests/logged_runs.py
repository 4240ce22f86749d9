"""lm-eval output folders in the tests: written by hand as a ``--predict_only --log_samples`` run
leaves them (for ``lm-eval-fin score``: a results file whose only figure is lm-eval's
``bypass``, and a samples file whose documents are those the task's own loader gives, with the
run's settings, and whose filtered responses are the records the filter stage keeps without
scoring), and read back with checks every run of our tasks must pass (:func:`read_task_run`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from lm_eval_fin.benchmarks.fin_lfqa import task as lfqa
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.outputs import records, runfiles
from tests.finlfqa_fixtures import hub_record, hub_records, write_hub_fixture

DATE = "2025-01-02T03-04-05.678901"
# what fin_ems logs of each judged pass: its rounds and the judge's usage
EMS_ROUNDS_LOG = re.compile(r"fin_ems: (\d+) judge rounds; judge usage (\{.*?\})")
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


def strict_json(text: str):
    """``text`` parsed as strict JSON: NaN and infinities are refused."""

    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def read_task_run(folder: Path, task: str, model: str | None = None) -> tuple[runfiles.Run, list[dict]]:
    """The newest run of ``task`` under ``folder`` (by lm-eval's model, when given) and its
    samples lines, read with :mod:`lm_eval_fin.outputs.runfiles`. Checked on the way: both files are
    strict JSON; a metric of the task's metric_list is a number where the run (in the results)
    or the document (in its sample) defines it, and absent where not, never null."""
    runs, _ = runfiles.read_results_dirs([folder])
    runs = [run for run in runs if task in run.tasks and (model is None or run.config.get("model") == model)]
    assert runs, f"no run of {task} under {folder}"
    run = runs[-1]
    results = strict_json(run.source.read_text(encoding="utf-8"))["results"][task]
    listed = taskfiles.metric_names(task)
    for name in listed:
        value = results.get(f"{name},none", 0.0)
        assert isinstance(value, (int, float)), (name, value)
    lines = [strict_json(line) for line in run.tasks[task].samples_path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        for name in listed:
            assert isinstance(line.get(name, 0.0), (int, float)), (name, line[name])
        assert set(line["metrics"]) <= set(listed)
    return run, lines


def ems_judge_usage(output: str) -> list[tuple[int, dict]]:
    """(rounds, the judge's usage) of every judged fin_ems pass a run logged, in order."""
    return [(int(rounds), ast.literal_eval(usage)) for rounds, usage in EMS_ROUNDS_LOG.findall(output)]
