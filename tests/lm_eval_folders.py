"""lm-eval output folders written by hand in the shape our tasks leave them (a results file as
lm-eval writes it; a samples file per task whose lines carry the scored-answer record and
every metric of the task's ``metric_list``, null where undefined), for tests of what reads
such folders. The task configs come from the shipped task YAMLs.

:func:`judged_runs` writes one judged run of each benchmark (fin_lfqa, fin_ems and
fin_agentbench_doc) with hand-picked values: some null (an unjudged document, a reference
without knowledge), some metrics null for every document.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.outputs import records

DATE = "2025-06-01T12-00-00.000001"
UNIX_DATE = 1748779200.0
LM_EVAL_VERSION = "0.4.13"
JUDGE = "openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct"
JUDGE_MODEL = "Qwen/Qwen2.5-7B-Instruct"
HUB_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


@dataclass
class Doc:
    id: str
    prompt: str
    target: str
    answer: str
    # metric -> value; a metric not named is null. Floats, as process_results returns them: datasets
    # types a column of JSON integers int64 and then cannot read a later 0.5 into it
    values: dict[str, float | None]
    record: dict[str, Any] = field(default_factory=dict)  # the benchmark's keys of the scored-answer record


@dataclass
class TaskFixture:
    task: str
    docs: list[Doc]
    settings: dict[str, Any]  # {"judge", "judge_options", "values"}, as documents carry them
    figures: dict[str, float | None] = field(default_factory=dict)  # run-level figures that are not the mean


def metric_list(task: str) -> list[dict]:
    """The task's metric_list as lm-eval dumps it: a function aggregation as its source text."""
    entries = []
    for entry in taskfiles.task_config(task)["metric_list"]:
        aggregation = str(entry["aggregation"])
        if aggregation.startswith("utils."):
            aggregation = f"def {aggregation.removeprefix('utils.')}(items):\n    ...\n"
        entries.append({**entry, "aggregation": aggregation})
    return entries


def figure(entry: dict, fixture: TaskFixture) -> float | None:
    metric = entry["metric"]
    if metric in fixture.figures:
        return fixture.figures[metric]
    defined = [d.values[metric] for d in fixture.docs if d.values.get(metric) is not None]
    if not defined:
        return None
    return float(sum(defined)) if entry["aggregation"].startswith("def total") else statistics.fmean(defined)


def stderr(entry: dict, fixture: TaskFixture) -> float | str:
    defined = [d.values[entry["metric"]] for d in fixture.docs if d.values.get(entry["metric"]) is not None]
    if entry["aggregation"] != "mean" or len(defined) < 2:
        return "N/A"
    return statistics.stdev(defined) / math.sqrt(len(defined))


def sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def sample_lines(fixture: TaskFixture) -> list[dict]:
    config = taskfiles.task_config(fixture.task)
    names = [entry["metric"] for entry in config["metric_list"]]
    settings = json.dumps({"task": fixture.task, **fixture.settings})
    lines = []
    for index, doc in enumerate(fixture.docs):
        logged_doc = {"id": doc.id, "question": f"question {doc.id}", "settings": settings}
        lines.append({
            "doc_id": index,
            "doc": logged_doc,
            "target": doc.target,
            "arguments": {"gen_args_0": {"arg_0": doc.prompt, "arg_1": config.get("generation_kwargs", {})}},
            "resps": [[doc.answer]],
            "filtered_resps": [records.encode(doc.answer, doc.record)],
            "filter": "none",
            "metrics": names,
            "doc_hash": sha(logged_doc),
            "prompt_hash": sha(doc.prompt),
            "target_hash": sha(doc.target),
            **{name: doc.values.get(name) for name in names},
        })
    return lines


def write_run(folder: Path, tasks: list[TaskFixture], model_args: str = f"pretrained={HUB_MODEL},dtype=float32",
              model: str = "hf", date: str = DATE) -> Path:
    """One run of ``tasks`` under ``folder/<model>/`` as lm-eval writes it; the results file."""
    run_folder = folder / "model"
    run_folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"results": {}, "configs": {}, "versions": {}, "higher_is_better": {}, "n-samples": {}}
    for fixture in tasks:
        config = taskfiles.task_config(fixture.task)
        entries = metric_list(fixture.task)
        entry_results: dict[str, Any] = {"alias": fixture.task}
        for entry in entries:
            entry_results[f"{entry['metric']},none"] = figure(entry, fixture)
            entry_results[f"{entry['metric']}_stderr,none"] = stderr(entry, fixture)
        results["results"][fixture.task] = entry_results
        results["configs"][fixture.task] = {**config, "metric_list": entries, "num_fewshot": 0}
        results["versions"][fixture.task] = config.get("metadata", {}).get("version")
        results["higher_is_better"][fixture.task] = {e["metric"]: e["higher_is_better"] for e in entries}
        results["n-samples"][fixture.task] = {"original": len(fixture.docs), "effective": len(fixture.docs)}
        path = run_folder / f"samples_{fixture.task}_{date}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in sample_lines(fixture)), encoding="utf-8")
    results.update({
        "config": {"model": model, "model_args": model_args, "batch_size": 1, "limit": None, "bootstrap_iters": 100000,
                   "gen_kwargs": None, "random_seed": 0, "numpy_seed": 1234, "torch_seed": 1234,
                   "fewshot_seed": 1234},
        "git_hash": None, "date": UNIX_DATE, "transformers_version": "4.57.0", "lm_eval_version": LM_EVAL_VERSION,
        "model_source": model, "model_name": model_args.split(",")[0].partition("=")[2],
        "chat_template_sha": "0" * 64, "total_evaluation_time_seconds": "12.5",
    })
    path = run_folder / f"results_{date}.json"
    path.write_text(json.dumps(results, indent=2, allow_nan=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------------- judged fixtures


def judged_settings(values: dict[str, Any]) -> dict[str, Any]:
    return {"judge": JUDGE, "judge_options": {"temperature": 0.0}, "values": values}


def lfqa_fixture() -> TaskFixture:
    """Three documents: the third unjudged (judge failure), the first citing no knowledge; no
    answer has code, so the code metrics are null everywhere."""
    judged = [(4, 4, 3), (2, 3, 3), None]
    docs = []
    for i, (scores, share) in enumerate(zip(judged, (0.25, 0.5, 1.0))):
        values = {name: share for name in ("numeric_precision", "numeric_recall", "numeric_f1", "evidence_precision",
                                           "evidence_recall", "evidence_f1", "rouge_l")}
        values.update(bertscore_f1=0.8 + i / 100, knowledge_recall=None if i == 0 else share,
                      knowledge_skipped=1.0 if i == 0 else 0.0, judge_failure=float(scores is None),
                      judge_parse_failure=0.0, judge_skipped=0.0, parse_failure=0.0, index_base=1.0,
                      truncated_answers=0.0)
        judge = {"spec": JUDGE, "prompt_version": "lfqa-prompt-1", "reply": None, "error": "timeout", "scores": None}
        if scores:
            values.update(judge_accuracy=float(scores[0]), judge_numerical=float(scores[1]), judge_entailment=float(scores[2]),
                          judge_score=float(sum(scores)))
            judge.update(reply=json.dumps(dict(zip(("accuracy", "numerical_correctness", "evidence_entailment"),
                                                   scores))), error=None)
        docs.append(Doc(f"lfqa-{i}", f"Reports ... question {i}?", f"reference {i}", f"answer {i} [1]", values,
                        {"judge": judge, "code": [], "bertscore_f1": values["bertscore_f1"]}))
    return TaskFixture("fin_lfqa", docs, judged_settings({"data_path": None, "bertscore_model": "roberta-large",
                                                           "index_base": None}))


def ems_fixture(data_file: Path) -> TaskFixture:
    """Two judged documents; the offline EMS is null everywhere (a judged run); the BLEU figure
    differs from the mean of the per-document values (a figure the samples do not explain)."""
    docs = []
    for i, share in enumerate((0.4, 0.6)):
        values = {f"{p}_{m}": share for p in ("rouge_l", "ems_llm", "ems_rouge", "ems_bertscore", "ragchecker")
                  for m in ("precision", "recall", "f1")}
        values.update(bleu=0.02 * (i + 1), bertscore_f1=0.85, judge_failure=0.0, judge_parse_failure=0.0,
                      truncated_documents=0.0, truncated_answers=float(i), degenerate_answer=0.0)
        docs.append(Doc(f"EMS-{i}", f"Transcript ... question {i}", f"reference {i}", f"answer {i}", values,
                        {"judge": {"spec": JUDGE, "prompt_version": "ems-prompts-1"}, "bertscore_f1": 0.85}))
    return TaskFixture("fin_ems", docs, judged_settings({"data_path": str(data_file), "bertscore_model": None}),
                       figures={"bleu": 0.031})


def agentbench_fixture(data_dir: Path) -> TaskFixture:
    docs = []
    for i, ndcg in enumerate((1.0, 0.5, 0.0)):
        values = {name: ndcg for name in ("ndcg@5", "map@5", "mrr@5", "ndcg@10", "map@10", "mrr@10")}
        values.update(parse_failure=float(ndcg == 0.0), truncated_answers=0.0)
        docs.append(Doc(f"q{i}", f"Rank the documents for question {i}", "[0, 1]", "[0, 1, 2]", values,
                        {"ranking": [0, 1, 2]}))
    return TaskFixture("fin_agentbench_doc", docs, {"judge": None, "judge_options": {}, "values": {
        "data_path": str(data_dir), "gain": "exponential"}})


def judged_runs(root: Path) -> dict[str, Path]:
    """A judged run of each benchmark, each in its own lm-eval output folder under ``root``
    (with the local data files fin_ems and fin_agentbench read)."""
    data = root / "data-files"
    (data / "agentbench").mkdir(parents=True)
    ems_file = data / "earnings_call_qa.jsonl"
    ems_file.write_text('{"id": "EMS-0"}\n{"id": "EMS-1"}\n', encoding="utf-8")
    (data / "agentbench" / "document_ranking.jsonl").write_text('{"query_id": "q0"}\n', encoding="utf-8")
    fixtures = {"fin_lfqa": lfqa_fixture(), "fin_ems": ems_fixture(ems_file),
                "fin_agentbench_doc": agentbench_fixture(data / "agentbench")}
    folders = {}
    for task, fixture in fixtures.items():
        write_run(root / task, [fixture])
        folders[task] = root / task
    return folders
