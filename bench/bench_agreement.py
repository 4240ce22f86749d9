"""`lm-eval-fin agreement` at scale: many annotators, many answers (issue 33).

CPU figures (each ratio against a peer or a goal measured in the same run, same inputs):

* the whole command through the console script on 100 annotators x 1,000 answers (100,000
  labels, 10 models x 100 questions of fin_lfqa, one judge, 1000 resamples per interval),
  against the 60 s goal; and the lines it prints (annotators pooled);
* 8 annotators x 30 answers: the default (pooled) against ``--pairwise`` (every pair of
  annotators and each annotator against the judge: 28 + 8 more comparisons), same files;
* the statistics alone: :func:`lm_eval_fin.agreement.stats.compare` on 10,000 clustered ratings
  (1..5 against 1..5, 200 resamples) through count tables, against the same call resampling
  the units one by one (scipy and scikit-learn on every resample, the code before issue 33).

The runs and labels are made up here (tests/judged_runs.py writes lm-eval folders in the
tasks' shape): each answer has a quality, the judge and each annotator rate it 1..5 through
their own noise.

    python bench/bench_agreement.py [--annotators 100] [--answers 1000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lm_eval_fin.agreement import stats  # noqa: E402
from lm_eval_fin.agreement.criteria import Scale  # noqa: E402
from tests.judged_runs import lfqa_doc, write_run  # noqa: E402

JUDGE = "openai:http://127.0.0.1:1/v1#bench-judge"
CRITERIA = ("accuracy", "numerical_correctness", "evidence_entailment")
SCRIPT = Path(sys.executable).parent / "lm-eval-fin"
GOAL_S = 60.0


def _rating(quality: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(np.rint(quality + rng.normal(0, noise, quality.shape)), 1, 5).astype(int)


def make_study(folder: Path, annotators: int, answers: int, models: int = 10, seed: int = 0) -> tuple[Path, Path]:
    """Judged runs of ``models`` models (``answers`` answers in all) and a label file of every
    answer by each of ``annotators`` annotators."""
    rng = np.random.default_rng(seed)
    questions = answers // models
    quality = rng.normal(3.2, 1.0, (models, questions, len(CRITERIA)))
    runs = folder / "runs"
    for m in range(models):
        judge = _rating(quality[m], 0.6, rng)
        docs = [lfqa_doc(f"q{i}", f"model {m} answers question {i}", tuple(int(v) for v in judge[i]))
                for i in range(questions)]
        write_run(runs, "fin_lfqa", f"model{m:02d}", JUDGE, docs)
    labels = folder / "labels.jsonl"
    with open(labels, "w", encoding="utf-8") as out:
        for a in range(annotators):
            rated = _rating(quality, 0.7, rng)
            for m in range(models):
                for i in range(questions):
                    out.write(json.dumps({"task": "fin_lfqa", "id": f"q{i}", "model": f"model{m:02d}",
                                          "annotator": f"a{a:03d}",
                                          "labels": dict(zip(CRITERIA, map(int, rated[m, i])))}) + "\n")
    return runs, labels


def agreement(runs: Path, labels: Path, out: Path, *extra: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([str(SCRIPT), "agreement", str(runs), "--labels", str(labels), "--output_path", str(out),
                           *extra], capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"agreement exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done


def run(annotators: int = 100, answers: int = 1000) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-agreement-") as tmp:
        root = Path(tmp)
        made = time.perf_counter()
        runs, labels = make_study(root / "big", annotators, answers)
        made_s = time.perf_counter() - made
        seconds, done = agreement(runs, labels, root / "big" / "out")
        comparisons = len(json.loads((root / "big" / "out" / "agreement.json").read_text())["comparisons"])
        progress = [line for line in done.stderr.splitlines() if "] " in line]
        rows += [
            {"figure": f"agreement, {annotators} annotators x {answers} answers: wall time (s)", "ours": seconds,
             "peer": GOAL_S, "ratio": seconds / GOAL_S, "unit": "s",
             "note": f"{annotators * answers} labels, 1000 resamples, console script; goal {GOAL_S:.0f} s; "
                     f"{len(progress)} progress lines on stderr; inputs made in {made_s:.0f} s"},
            {"figure": f"agreement, {annotators} annotators x {answers} answers: stdout lines",
             "ours": len(done.stdout.splitlines()), "unit": "lines", "note": f"{comparisons} comparisons"},
        ]
        runs, labels = make_study(root / "small", 8, 30, models=3)
        pooled_s, pooled = agreement(runs, labels, root / "small" / "pooled")
        pairwise_s, pairwise = agreement(runs, labels, root / "small" / "pairwise", "--pairwise")
        rows += [
            {"figure": "agreement, 8 annotators x 30 answers: pooled vs --pairwise (s)", "ours": pooled_s,
             "peer": pairwise_s, "ratio": pooled_s / pairwise_s, "unit": "s",
             "note": f"stdout {len(pooled.stdout.splitlines())} vs {len(pairwise.stdout.splitlines())} lines"},
        ]
    rng = np.random.default_rng(1)
    n, clusters = 10_000, np.repeat(np.arange(1000), 10)
    x = rng.integers(1, 6, n)
    y = np.clip(x + rng.integers(-1, 2, n), 1, 5)
    five = Scale(1, 5, ordinal=True)
    start = time.perf_counter()
    table = stats.compare(x, y, five, clusters=clusters.tolist(), resamples=200)
    table_s = time.perf_counter() - start
    start = time.perf_counter()
    units = stats._compare_units(x.astype(float), y.astype(float), five, clusters.tolist(), 200, 0, 0.95, {})
    units_s = time.perf_counter() - start
    rows.append({"figure": "compare(), 10,000 clustered ratings, 200 resamples: count tables vs one by one (s)",
                 "ours": table_s, "peer": units_s, "ratio": table_s / units_s, "unit": "s",
                 "note": f"same Pearson {table.pearson.value:.4f} / {units.pearson.value:.4f}, kappa "
                         f"{table.kappa.value:.4f} / {units.kappa.value:.4f}; table time includes scipy p-values"})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=100)
    parser.add_argument("--answers", type=int, default=1000)
    options = parser.parse_args()
    for row in run(options.annotators, options.answers):
        print(row)
