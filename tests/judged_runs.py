"""lm-eval output folders of judged fin_lfqa and fin_ems runs in the shape the tasks write them
(one results file and one samples file per run, the settings in each doc, the scored-answer
record as the filtered response, every metric as a top-level key of each sample), made up
here so the agreement tests can set every judged value."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lm_eval_fin.outputs import records

LFQA_METRICS = ("judge_accuracy", "judge_numerical", "judge_entailment", "judge_score")
EMS_METRICS = ("ems_llm_precision", "ems_llm_recall", "ems_llm_f1", "ragchecker_precision", "ragchecker_recall",
               "ragchecker_f1")


def lfqa_doc(doc_id: str, answer: str, scores: tuple[int, int, int] | None) -> dict[str, Any]:
    """One fin_lfqa document as judged: the three criteria (None: the judge failed on it)."""
    values: dict[str, float | None] = dict.fromkeys(LFQA_METRICS)
    judge: dict[str, Any] = {"prompt_version": 1, "scores": None, "error": "timed out" if scores is None else None}
    if scores is not None:
        values.update(zip(LFQA_METRICS, (*scores, sum(scores))))
        judge["scores"] = dict(zip(("accuracy", "numerical_correctness", "evidence_entailment"), scores))
    return {"id": doc_id, "answer": answer, "values": values, "record": {"judge": judge},
            "doc": {"question": f"question {doc_id}?", "reference_clauses": json.dumps([{"clause": "ref"}])}}


def ems_doc(doc_id: str, answer: str, points: list[str], scores: list[float | None], max_score: int = 10,
            f1: float | None = None) -> dict[str, Any]:
    """One fin_ems document: the judge's reference points and s_i in [0, 1] (None: unjudged);
    EMS-Recall is their mean; ``f1`` (default: the recall) stands in for the other metrics."""
    judged = [s for s in scores if s is not None]
    recall = sum(judged) / len(scores) if judged and len(judged) == len(scores) else None
    values = dict.fromkeys(EMS_METRICS)
    values.update({"ems_llm_recall": recall, "ems_llm_f1": recall if f1 is None else f1,
                   "ems_llm_precision": recall, "ragchecker_f1": recall})
    record = {"judge": {"spec": None, "prompt_version": 1},
              "ems": {"reference_points": points, "answer_points": [], "alignment": [0] * len(points),
                      "scores": {"llm": scores, "rouge": None, "bertscore": None}}}
    return {"id": doc_id, "answer": answer, "values": values, "record": record, "max_score": max_score,
            "doc": {"question": f"question {doc_id}?", "reference": "the reference answer", "transcript": "..."}}


def write_run(folder: Path, task: str, model: str, judge: str | None, docs: list[dict[str, Any]],
              date: str = "2025-01-01T00-00-00.000001") -> Path:
    """An lm-eval output folder (``folder/<model>/``) of one run of ``task`` by ``model`` judged
    by ``judge`` (a spec, or None); returns ``folder``."""
    metrics = LFQA_METRICS if task.startswith("fin_lfqa") else EMS_METRICS
    out = folder / model
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for position, doc in enumerate(docs):
        values = {"max_score": doc["max_score"]} if "max_score" in doc else {}
        settings = {"task": task, "judge": judge, "judge_options": {}, "values": values}
        record = dict(doc["record"])
        if isinstance(record.get("judge"), dict):
            record["judge"] = {**record["judge"], "spec": judge}
        full_doc = {"id": doc["id"], **doc["doc"], "settings": json.dumps(settings)}
        digest = hashlib.sha256(json.dumps(full_doc, sort_keys=True).encode()).hexdigest()
        lines.append({
            "doc_id": position, "doc": full_doc, "target": "", "arguments": {"gen_args_0": {"arg_0": "prompt"}},
            "resps": [[doc["answer"]]], "filtered_resps": [records.encode(doc["answer"], record)], "filter": "none",
            "metrics": list(metrics), **{m: doc["values"].get(m) for m in metrics},
            "doc_hash": digest, "prompt_hash": digest, "target_hash": digest,
        })
    means = {}
    for metric in metrics:
        defined = [line[metric] for line in lines if line[metric] is not None]
        means[f"{metric},none"] = sum(defined) / len(defined) if defined else None
        means[f"{metric}_stderr,none"] = "N/A"
    results = {
        "results": {task: {"alias": task, **means}},
        "configs": {task: {"task": task, "metadata": {"version": 1},
                           "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True}
                                           for m in metrics]}},
        "versions": {task: 1},
        "n-samples": {task: {"original": len(lines), "effective": len(lines)}},
        "higher_is_better": {task: dict.fromkeys(metrics, True)},
        "config": {"model": "hf", "model_args": f"pretrained=org/{model}", "limit": None},
        "model_name": f"org/{model}",
        "lm_eval_version": "0.4.13",
    }
    (out / f"results_{date}.json").write_text(json.dumps(results, allow_nan=False), encoding="utf-8")
    (out / f"samples_{task}_{date}.jsonl").write_text(
        "".join(json.dumps(line, allow_nan=False) + "\n" for line in lines), encoding="utf-8")
    return folder
