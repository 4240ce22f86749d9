"""How many CPU threads the demo's model should use: seconds per document at 1, 2 and torch's
default thread count, on the same machine under the same load; and (``--batch N``) what
answering N documents in one batch saves per document, at the thread count the demo picks.

Each setting runs in a child process of its own (OpenMP reads its thread count when torch loads),
loads the embedded SmolLM2-135M in float32 as ``make demo`` does, and answers fin_ems demo
prompts with the demo's answer budget (every answer forced to its full length, so each setting
does the same work). The settings take turns, round after round, so a change of load hits all
of them alike; the load average is printed beside each figure, since a shared machine's load
moves the absolute numbers (the ratios are the result).

    python bench/bench_demo_threads.py [--rounds 2] [--tokens 128] [--docs 1] [--batch 4]
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
from lm_eval_fin.plumbing import paths
from lm_eval_fin.benchmarks.fin_ems import data, prompt
tokens, docs, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
folder = str(paths.embedded_model())
tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
records = data.read_dataset(str(paths.data_path("ems_demo")))[:docs]
texts = [tokenizer.apply_chat_template([{"role": "user", "content": prompt.render_prompt(dict(r, truncated=False))}],
                                       add_generation_prompt=True, tokenize=False) for r in records]
seconds = []
for first in range(0, len(texts), batch):
    ids = tokenizer(texts[first:first + batch], return_tensors="pt", padding=True, add_special_tokens=False)
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(**ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                       pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
    took = time.perf_counter() - start
    seconds += [took / len(ids["input_ids"])] * len(ids["input_ids"])
print(json.dumps({"threads": torch.get_num_threads(), "seconds": seconds}))
"""


def run_setting(setting: str, tokens: int, docs: int, batch: int = 1) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
        if setting != "default":
            env[name] = setting
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", CHILD, str(tokens), str(docs), str(batch)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"setting": setting, "load": (load + os.getloadavg()[0]) / 2, **found}


def measure(rounds: int, tokens: int, docs: int, batch: int = 1) -> dict[str, list[dict]]:
    """Setting -> its runs; with ``batch`` above 1, the demo's thread count answering the
    documents one at a time and ``batch`` at a time."""
    threads = demo_threads()
    settings = (threads, f"{threads} batch {batch}") if batch > 1 else SETTINGS
    found: dict[str, list[dict]] = {setting: [] for setting in settings}
    for round_ in range(rounds):
        for setting in settings:
            threads, _, size = setting.partition(" batch ")
            one = run_setting(threads, tokens, docs, int(size or 1))
            found[setting].append(one)
            print(f"round {round_ + 1} threads={setting} ({one['threads']}): "
                  f"{sum(one['seconds']) / len(one['seconds']):.1f} s/doc, load {one['load']:.1f}", file=sys.stderr)
    return found


def demo_threads() -> str:
    from lm_eval_fin.plumbing import cpus

    return str(cpus.compute_threads())


def per_doc(runs: list[dict]) -> float:
    seconds = [s for run in runs for s in run["seconds"]]
    return sum(seconds) / len(seconds)


def run(rounds: int = 1, tokens: int = 64, docs: int = 1, batch: int = 1) -> list[dict]:
    """The rows of ``make bench`` (short answers there: two threads on a loaded machine can take
    minutes a document)."""
    started = time.perf_counter()
    found = measure(rounds, tokens, docs, batch)
    peer = next(iter(found)) if batch > 1 else "default"  # one at a time, or torch's default threads
    default = per_doc(found[peer])
    rows = []
    for setting, runs in found.items():
        load = sum(run["load"] for run in runs) / len(runs)
        rows.append({
            "figure": f"demo generation, threads={setting} ({runs[0]['threads']})", "ours": per_doc(runs),
            "peer": default, "ratio": per_doc(runs) / default, "unit": "s/doc",
            "note": f"peer: threads={peer}; fin_ems demo prompt, {tokens} tokens; load average {load:.1f} on "
                    f"{os.cpu_count()} CPUs",
        })
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--docs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1, help="compare one at a time with this batch size")
    options = parser.parse_args()
    for row in run(options.rounds, options.tokens, options.docs, options.batch):
        print(f"{row['figure']}: {row['ours']:.1f} {row['unit']} (x{row['ratio']:.2f} of the peer; {row['note']})")
