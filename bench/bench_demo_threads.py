"""How many CPU threads the demo's model should use: seconds per document at 1, 2 and torch's
default thread count, on the same machine under the same load.

Each setting runs in a child process of its own (OpenMP reads its thread count when torch loads),
loads the embedded SmolLM2-135M in float32 as ``make demo`` does, and answers fin_ems demo
prompts with the demo's answer budget (every answer forced to its full length, so each setting
does the same work). The settings take turns, round after round, so a change of load hits all
of them alike; the load average is printed beside each figure, since a shared machine's load
moves the absolute numbers (the ratios are the result).

    python bench/bench_demo_threads.py [--rounds 2] [--tokens 384] [--docs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = ("1", "2", "default")

CHILD = r"""
import json, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from lm_eval_fin import paths
from lm_eval_fin.benchmarks.fin_ems import data, prompt
tokens, docs = int(sys.argv[1]), int(sys.argv[2])
folder = str(paths.embedded_model())
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
records = data.read_dataset(str(paths.data_path("ems_demo")))[:docs]
seconds = []
for record in records:
    text = prompt.render_prompt(dict(record, truncated=False))
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(**ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"threads": torch.get_num_threads(), "seconds": seconds}))
"""


def run_setting(setting: str, tokens: int, docs: int) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
        if setting != "default":
            env[name] = setting
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", CHILD, str(tokens), str(docs)], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"setting": setting, "load": (load + os.getloadavg()[0]) / 2, **found}


def measure(rounds: int, tokens: int, docs: int) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {setting: [] for setting in SETTINGS}
    for round_ in range(rounds):
        for setting in SETTINGS:
            one = run_setting(setting, tokens, docs)
            found[setting].append(one)
            print(f"round {round_ + 1} threads={setting} ({one['threads']}): "
                  f"{sum(one['seconds']) / len(one['seconds']):.1f} s/doc, load {one['load']:.1f}", file=sys.stderr)
    return found


def per_doc(runs: list[dict]) -> float:
    seconds = [s for run in runs for s in run["seconds"]]
    return sum(seconds) / len(seconds)


def run(rounds: int = 1, tokens: int = 384, docs: int = 1) -> list[dict]:
    started = time.perf_counter()
    found = measure(rounds, tokens, docs)
    default = per_doc(found["default"])
    rows = []
    for setting, runs in found.items():
        load = sum(run["load"] for run in runs) / len(runs)
        rows.append({
            "figure": f"demo generation, threads={setting} ({runs[0]['threads']})", "ours": per_doc(runs),
            "peer": default, "ratio": per_doc(runs) / default, "unit": "s/doc",
            "note": f"fin_ems demo prompt, {tokens} tokens; load average {load:.1f} on {os.cpu_count()} CPUs",
        })
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=384)
    parser.add_argument("--docs", type=int, default=1)
    options = parser.parse_args()
    for row in run(options.rounds, options.tokens, options.docs):
        print(f"{row['figure']}: {row['ours']:.1f} {row['unit']} (x{row['ratio']:.2f} of default; {row['note']})")
