"""Real lm-eval output for the report's tests: `lm-eval-fin run` on the shipped demo data, two
documents per run, samples logged; and copies of such output altered the way real output can be
(no samples, degenerate answers, hostile text).

The five runs of issue 27's leaderboard case, started side by side:

* ``greedy``: the embedded model on fin_agentbench_doc with the task's own settings;
* ``sampled``: the same with ``do_sample=True,temperature=1.0`` and seed 7;
* ``short``: the same greedy, with ``max_gen_toks=32`` (the task's is 64);
* ``ems``: the embedded model on fin_ems, offline, with ``max_gen_toks=64`` (the task's is 1024);
* ``second``: a second model (a tiny random Llama with the embedded model's tokenizer, made
  here in a second) on fin_agentbench_doc.

The embedded model's four runs make one row of its own (the two greedy runs of different
tasks merged, fin_ems tagged with its answer budget) and one row per setting that reran a task;
the tiny model its own row.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from lm_eval_fin.benchmarks.fin_agentbench.score import score_ranking
from lm_eval_fin.plumbing import paths

BIN = Path(sys.executable).parent
LIMIT = 2
EMS_TOKENS = 64
SHORT_TOKENS = 32
SECOND_MODEL = "tiny-random-llama"
HOSTILE = '</title></script><script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def tiny_model(folder: Path, model_dir: Path) -> Path:
    """A random two-layer Llama with the embedded model's tokenizer and chat template: a second
    model whose answers differ from the first, made without a download."""
    import torch
    from transformers import AutoConfig, LlamaConfig, LlamaForCausalLM

    if (folder / "config.json").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    base = AutoConfig.from_pretrained(model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=base.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=base.max_position_embeddings, bos_token_id=base.bos_token_id,
        eos_token_id=base.eos_token_id, pad_token_id=getattr(base, "pad_token_id", None), tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copy(model_dir / name, folder / name)
    return folder


def start_run(out: Path, model_dir: Path, task: str, metadata: dict, extra: list[str]) -> tuple[Path, subprocess.Popen]:
    """``lm-eval-fin run`` in a child process, one torch thread (the runs go side by side)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LM_EVAL_FIN_JUDGE")}
    env["OMP_NUM_THREADS"] = "1"
    process = subprocess.Popen(
        [BIN / "lm-eval-fin", "run", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
         "--apply_chat_template", "--batch_size", "4", "--tasks", task, "--metadata", json.dumps(metadata),
         "--limit", str(LIMIT), "--log_samples", "--output_path", str(out), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )
    return out, process


def finish(task: str, out: Path, process: subprocess.Popen) -> Path:
    _, stderr = process.communicate(timeout=900)
    if process.returncode != 0:
        raise RuntimeError(f"lm-eval-fin run {task} failed:\n{stderr[-4000:]}")
    return out


def make_runs(root: Path, model_dir: Path) -> dict[str, Path]:
    """The five lm-eval output folders of the module docstring, by name."""
    second = tiny_model(root / "models" / SECOND_MODEL, Path(model_dir))
    agentbench = {"data_path": str(paths.data_path("finagentbench_demo"))}
    ems = {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
           "max_gen_toks": EMS_TOKENS}
    doc = "fin_agentbench_doc"
    plan = {
        "ems": ("fin_ems", model_dir, ems, ["--gen_kwargs", f"max_gen_toks={EMS_TOKENS}"]),
        "greedy": (doc, model_dir, agentbench, []),
        "sampled": (doc, model_dir, agentbench, ["--gen_kwargs", "do_sample=True,temperature=1.0", "--seed", "7"]),
        "short": (doc, model_dir, agentbench, ["--gen_kwargs", f"max_gen_toks={SHORT_TOKENS}"]),
        "second": (doc, second, agentbench, []),
    }
    done = {name for name in plan if list((root / name).rglob("results_*.json"))}  # made before in this folder
    started = {name: (task, start_run(root / name, model, task, metadata, extra))
               for name, (task, model, metadata, extra) in plan.items() if name not in done}
    return {**{name: root / name for name in done}, **{name: finish(task, *run) for name, (task, run) in started.items()}}


def only(folder: Path, pattern: str) -> Path:
    found = sorted(folder.rglob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def rename_model(folder: Path, name: str) -> None:
    """The run's results say another model made it."""
    results_path = only(folder, "results_*.json")
    results = json.loads(results_path.read_text())
    results["config"]["model_args"]["pretrained"] = name
    results_path.write_text(json.dumps(results))


def hostile_copy(source: Path, target: Path) -> Path:
    """A copy whose model name and answers are markup and script."""
    copy_run(source, target)
    rename_model(target, HOSTILE)
    samples_path = only(target, "samples_*.jsonl")
    lines = read_lines(samples_path)
    for line in lines:
        record = json.loads(line["filtered_resps"][0])
        record["answer"] = HOSTILE + " [4, 1, 0]"
        line["filtered_resps"] = [json.dumps(record)]
        line["resps"] = [[HOSTILE + " [4, 1, 0]"]]
        line["doc"]["prompt"] = HOSTILE + line["doc"]["prompt"]
    write_lines(samples_path, lines)
    return target


def echo_copy(source: Path, target: Path, model: str = "echo-model") -> Path:
    """A copy of a fin_agentbench run as if another model had echoed the candidates in the order
    given: each answer lists them in input order, ranked as such, and the per-sample
    ``degenerate_answer`` metric says so (1.0), as the tasks log it."""
    copy_run(source, target)
    rename_model(target, model)
    samples_path = only(target, "samples_*.jsonl")
    lines = read_lines(samples_path)
    for line in lines:
        candidates = line["doc"]["candidates"]
        answer = "[" + ", ".join(map(str, candidates)) + "]"
        line["filtered_resps"] = [json.dumps({"format": "lm-eval-fin/1", "answer": answer, "truncated_answer": False,
                                              "ranking": candidates})]
        line["resps"] = [[answer]]
        line.update(score_ranking(line["doc"], candidates, gain="exponential"), degenerate_answer=1.0)
        line["metrics"] = [*line.get("metrics", []), "degenerate_answer"]
    write_lines(samples_path, lines)
    results_path = only(target, "results_*.json")
    results = json.loads(results_path.read_text())
    for entry in results["results"].values():
        for key in list(entry):
            metric = key.removesuffix(",none")
            if key.endswith(",none") and isinstance(lines[0].get(metric), float):
                entry[key] = sum(line[metric] for line in lines) / len(lines)
        entry["degenerate_answer,none"] = 1.0
        entry["degenerate_answer_stderr,none"] = 0.0
    for config in results["configs"].values():
        config["metric_list"].append({"metric": "degenerate_answer", "aggregation": "mean", "higher_is_better": False})
    for higher in results.get("higher_is_better", {}).values():
        higher["degenerate_answer"] = False
    results_path.write_text(json.dumps(results))
    return target


def redate(folder: Path, date: str) -> None:
    """Rename a run's files to another lm-eval run id (a run made at another time)."""
    for path in list(folder.rglob("results_*.json")) + list(folder.rglob("samples_*.jsonl")):
        old = path.stem.rsplit("_", 1)[-1]
        path.rename(path.with_name(path.name.replace(old, date)))


def rewrite_samples(folder: Path, change) -> None:
    """Apply ``change(line)`` to every sample line, and set lm-eval's figures to the lines' means."""
    samples_path = only(folder, "samples_*.jsonl")
    lines = read_lines(samples_path)
    for line in lines:
        change(line)
    write_lines(samples_path, lines)
    results_path = only(folder, "results_*.json")
    results = json.loads(results_path.read_text())
    for entry in results["results"].values():
        for key in list(entry):
            metric = key.removesuffix(",none")
            if key.endswith(",none") and not metric.endswith("_stderr") and metric in lines[0]:
                values = [line[metric] for line in lines if isinstance(line.get(metric), (int, float))]
                entry[key] = sum(values) / len(values) if values else None
    results_path.write_text(json.dumps(results))


def set_model_args(folder: Path, **args) -> None:
    results_path = only(folder, "results_*.json")
    results = json.loads(results_path.read_text())
    results["config"]["model_args"].update(args)
    results_path.write_text(json.dumps(results))


def rename_task(folder: Path, old: str, new: str) -> None:
    """The run as if it had been a run of task ``new`` (same answers and figures)."""
    results_path = only(folder, "results_*.json")
    results = json.loads(results_path.read_text().replace(f'"{old}"', f'"{new}"'))
    results_path.write_text(json.dumps(results))
    samples_path = only(folder, f"samples_{old}_*.jsonl")
    samples_path.rename(samples_path.with_name(samples_path.name.replace(f"samples_{old}_", f"samples_{new}_")))


def more_questions(folder: Path, questions: int) -> None:
    """The run's samples repeated under new question ids up to ``questions`` of them."""
    samples_path = only(folder, "samples_*.jsonl")
    lines = read_lines(samples_path)
    more = []
    for n in range(questions):
        line = json.loads(json.dumps(lines[n % len(lines)]))
        line["doc_id"] = n
        line["doc"]["id"] = f"{line['doc']['id']}~{n}"
        line["doc_hash"] = f"{line.get('doc_hash', '')}~{n}"
        more.append(line)
    write_lines(samples_path, more)
    task = re.fullmatch(r"samples_(.+)_\d{4}-\d\d-\d\dT.+\.jsonl", samples_path.name)[1]
    counted(only(folder, "results_*.json"), {task}, questions)


def counted(results_path: Path, tasks: set[str], questions: int) -> None:
    """The results file counts ``questions`` documents of ``tasks`` and holds no task hash of
    them (its samples were made by hand: the reader checks both against the samples file)."""
    results = json.loads(results_path.read_text())
    for task in tasks:
        results.setdefault("n-samples", {})[task] = {"original": questions, "effective": questions}
        (results.get("task_hashes") or {}).pop(task, None)
    results_path.write_text(json.dumps(results))
