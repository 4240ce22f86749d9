"""The real lm_eval CLI, in a subprocess, on a challenge-format fixture with the embedded model:
every listed metric per sample, each ranking as read in its sample's record."""

import json
import subprocess
import sys

from lm_eval_fin.outputs import records, runfiles
from lm_eval_fin.plumbing import paths
from tests.finagentbench_fixtures import chunk_prompt, document_record, write_jsonl
from tests.logged_runs import read_task_run, strict_json


def test_lm_eval_runs_fin_agentbench_on_a_fixture(tmp_path, embedded_model_dir):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(
        data / "document_ranking_fixture.jsonl",
        [
            document_record("d1", "What was the CEO's pay last year?", {"0": 4, "1": 1, "2": 0, "3": 0, "4": 0}),
            document_record("d2", "What guidance did management give analysts?", {"4": 3, "3": 1, "0": 0, "1": 0, "2": 0}),
        ],
    )
    chunks = ["Revenue was $12 million.", "The CEO earned $3 million.", "Cash rose 5%.", "Risk: suppliers."]
    write_jsonl(
        data / "chunk_ranking_fixture.jsonl",
        [{"uuid": "c1", "messages": [{"role": "user", "content": chunk_prompt("What was revenue?", chunks)}],
          "qrel": {"0": 2, "1": 0, "2": 1, "3": 0}}],
    )
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable, "-m", "lm_eval", "run",
            "--include_path", str(paths.tasks_dir()),
            "--model", "hf",
            "--model_args", f"pretrained={embedded_model_dir},dtype=float32",
            "--tasks", "fin_agentbench",
            "--apply_chat_template",
            "--gen_kwargs", "max_gen_toks=24",
            "--batch_size", "4",
            "--metadata", json.dumps({"data_path": str(data)}),
            "--output_path", str(out),
            "--log_samples",
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for task, count in (("fin_agentbench_doc", 2), ("fin_agentbench_chunk", 1)):
        run_, lines = read_task_run(out, task)
        values = {name: metric.value for name, metric in run_.tasks[task].metrics.items()}
        for metric in (*(f"{m}@{k}" for m in ("ndcg", "map", "map_hits", "mrr") for k in (5, 10)), "parse_failure"):
            assert 0.0 <= values[metric] <= 1.0, (task, metric, values[metric])
        assert len(lines) == count
        for line, sample in zip(lines, run_.tasks[task].samples):
            ranking = records.decode(line["filtered_resps"])["ranking"]
            assert (ranking is None) == (line["parse_failure"] == 1.0)
            assert ranking is None or set(ranking) <= set(line["doc"]["candidates"])
            assert sample.record["ranking"] == ranking and sample.answer == records.decode(line["filtered_resps"])["answer"]
            assert line["degenerate_answer"] == float(bool(records.decode(line["filtered_resps"])["degenerate"]))
    # the model's context (8192 tokens) holds the fixture's prompts: nothing is cut
    (results_path,) = out.rglob("results_*.json")
    results = strict_json(results_path.read_text())["results"]
    assert results["fin_agentbench_chunk"]["truncated_documents,none"] == 0.0
    assert "fin_agentbench" not in results  # a tag that names both tasks, no group: no figure of its own
    assert runfiles.read_results_dirs([out])[1] == []
