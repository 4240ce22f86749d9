"""Real lm-eval output for the report's tests: `lm-eval-fin run` with the embedded model on the
shipped demo data, two documents per run, samples logged; and copies of such output altered
the way real output can be (no samples, a judged copy, hostile text)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lm_eval_fin import paths

BIN = Path(sys.executable).parent
LIMIT = 2
EMS_TOKENS = 64
HOSTILE = '</title></script><script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'


def start_run(out: Path, model_dir: Path, task: str, metadata: dict, extra: list[str]) -> tuple[Path, subprocess.Popen]:
    """``lm-eval-fin run`` in a child process, one torch thread (three run side by side)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LM_EVAL_FIN_JUDGE", "LM_EVAL_FIN_DETAILS_DIR"))}
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
    """fin_agentbench_doc greedy and sampled, fin_ems offline: three lm-eval output folders,
    made by three runs at once (each waits on its own model load and generation)."""
    agentbench = {"data_path": str(paths.data_path("finagentbench_demo"))}
    ems = {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
           "max_gen_toks": EMS_TOKENS}
    started = {
        "greedy": ("fin_agentbench_doc", start_run(root / "greedy", model_dir, "fin_agentbench_doc", agentbench, [])),
        "sampled": ("fin_agentbench_doc", start_run(root / "sampled", model_dir, "fin_agentbench_doc", agentbench,
                                                    ["--gen_kwargs", "do_sample=True,temperature=1.0", "--seed", "7"])),
        "ems": ("fin_ems", start_run(root / "ems", model_dir, "fin_ems", ems,
                                     ["--gen_kwargs", f"max_gen_toks={EMS_TOKENS}"])),
    }
    return {name: finish(task, *run) for name, (task, run) in started.items()}


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


def hostile_copy(source: Path, target: Path) -> Path:
    """A copy whose model name and answers are markup and script."""
    copy_run(source, target)
    results_path = only(target, "results_*.json")
    results = json.loads(results_path.read_text())
    results["config"]["model_args"]["pretrained"] = HOSTILE
    results_path.write_text(json.dumps(results))
    samples_path = only(target, "samples_*.jsonl")
    lines = read_lines(samples_path)
    for line in lines:
        line["filtered_resps"] = [HOSTILE + " [4, 1, 0]"]
        line["resps"] = [[HOSTILE + " [4, 1, 0]"]]
        line["doc"]["prompt"] = HOSTILE + line["doc"]["prompt"]
    write_lines(samples_path, lines)
    return target
