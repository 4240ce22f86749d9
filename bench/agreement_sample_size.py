"""How many labelled answers a judge-reliability study needs: the width of the 95 % bootstrap
intervals of ``lm-eval-fin agreement`` against the number of answers, by simulation.

Each simulated answer has a latent quality q ~ N(0, 1); the judge and the annotator each see
it through their own noise (q + sigma * e) and rate it 1..5 by fixed cut points, which give
mostly good ratings (5 % 1s, 10 % 2s, 20 % 3s, 35 % 4s, 30 % 5s: LLM answers judged on the
FinLFQA criteria lean high). sigma is set so that the Pearson correlation of the two ratings
over many answers is the target: 0.63 and 0.85 bracket FinLFQA's reported 0.630 (evidence
entailment) and 0.853 (overall). For each number of answers n, ``--replicates`` studies are
drawn and :func:`lm_eval_fin.agreement.stats.compare` computes the figures as the command
does; the table gives the median interval width of each figure, and scipy's Fisher-z interval
width for Pearson beside the bootstrap one as a check.

Run: ``.venv/bin/python bench/agreement_sample_size.py`` (a few minutes on 2 cores); prints
a Markdown table (the one in docs/agreement.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats as scipy_stats

from lm_eval_fin.agreement import stats
from lm_eval_fin.agreement.criteria import Scale

FIVE = Scale(1, 5, ordinal=True)
SHARES = (0.05, 0.10, 0.20, 0.35, 0.30)  # of ratings 1..5
TARGETS = (0.63, 0.85)
SIZES = (25, 50, 100, 200, 400)


def rate(latent: np.ndarray, spread: float) -> np.ndarray:
    """Ratings 1..5 from latent values with standard deviation ``spread``, cut at the quantiles
    that give :data:`SHARES`."""
    cuts = scipy_stats.norm.ppf(np.cumsum(SHARES)[:-1]) * spread
    return np.searchsorted(cuts, latent) + 1


def draw(n: int, sigma: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    quality = rng.standard_normal(n)
    spread = np.sqrt(1 + sigma**2)
    return (rate(quality + sigma * rng.standard_normal(n), spread),
            rate(quality + sigma * rng.standard_normal(n), spread))


def calibrate(target: float, rng: np.random.Generator) -> float:
    """The noise that gives Pearson ``target`` between the two ratings (bisection on 200k answers)."""
    low, high = 0.0, 5.0
    for _ in range(40):
        sigma = (low + high) / 2
        people, judge = draw(200_000, sigma, rng)
        if scipy_stats.pearsonr(people, judge).statistic > target:
            low = sigma
        else:
            high = sigma
    return (low + high) / 2


def width(estimate: stats.Estimate | None) -> float:
    if estimate is None or estimate.low is None or estimate.high is None:
        return float("nan")
    return estimate.high - estimate.low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=stats.RESAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print("| target Pearson | n | Pearson (median) | Pearson width | Fisher-z width | Spearman width | Kendall width "
          "| weighted kappa width | exact-agreement width | bias width |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for target in TARGETS:
        sigma = calibrate(target, rng)
        for n in SIZES:
            rows = []
            for replicate in range(args.replicates):
                people, judge = draw(n, sigma, rng)
                f = stats.compare(people, judge, FIVE, resamples=args.resamples, seed=replicate)
                fisher = scipy_stats.pearsonr(people, judge).confidence_interval(0.95)
                rows.append((f.pearson.value, width(f.pearson), fisher.high - fisher.low, width(f.spearman),
                             width(f.kendall), width(f.kappa), width(f.exact), width(f.bias)))
            medians = np.nanmedian(np.asarray(rows, dtype=float), axis=0)
            print(f"| {target:.2f} | {n} | " + " | ".join(f"{v:.2f}" for v in medians) + " |", flush=True)
    print(f"\n{args.replicates} replicates per row, {args.resamples} resamples per interval, seed {args.seed}; "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
