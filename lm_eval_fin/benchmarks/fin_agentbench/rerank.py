"""``lm-eval-fin rerank``: FinCARDS on a FinAgentBench chunk-ranking file.

    lm-eval-fin rerank --data chunk_ranking_kaggle_dev.jsonl --judge vllm:Qwen/Qwen2.5-7B-Instruct \\
        --variant all --out run.jsonl

Writes one JSON line per query and variant (ranking of every chunk, best first; nDCG, MAP and
MRR at k when the record has grades; rank variance; cost; the audit trace) and prints a
table per variant: nDCG@k, MAP@k, MRR@k (x100, as in the paper), rank variance, and LLM calls
and tokens per query; then one line per judge stage (cards, intent, llm, screening,
tournament) with its requests, unusable answers, calls and tokens over the whole run.
Records without ``qrel`` (eval files) get rankings and no scores.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench.data import ChallengeFormatError, load_records
from lm_eval_fin.benchmarks.fin_agentbench.prompt import parse_challenge_prompt, prompt_text
from lm_eval_fin.judge import load_judge
from lm_eval_fin.judge.options import options_from_args
from lm_eval_fin.rerank.pipeline import VARIANTS, FinCardsConfig, Query, RunResult, run_fincards


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="chunk-ranking challenge JSONL file, or a folder of chunk_ranking*.jsonl")
    parser.add_argument(
        "--variant", default="full", choices=[*VARIANTS, "all"],
        help="which row of the paper's ablation to run; 'all' runs every one and prints the table (default: full)",
    )
    parser.add_argument("--out", default=None, help="write rankings, scores, costs and audit traces here (JSONL)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stage-3 regrouping (default: 0)")
    parser.add_argument("--k", type=int, default=10, help="metric cutoff and stage-3 top-k (default: 10)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries")
    parser.add_argument(
        "--max-attempts", type=int, default=FinCardsConfig.max_attempts,
        help="times a judge request is asked before its answer counts as unusable (default: %(default)s)",
    )
    parser.add_argument(
        "--llm-chunk-chars", type=int, default=FinCardsConfig.llm_chunk_chars,
        help="at most this many characters of each chunk are shown to the zero-shot llm baseline (default: %(default)s)",
    )
    parser.add_argument(
        "--llm-prompt-chars", type=int, default=FinCardsConfig.llm_prompt_chars,
        help="characters of chunk text in the llm baseline's prompt, shared by its candidates; the default "
        "fits a 32k-token context (default: %(default)s)",
    )


def queries_from_records(records: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries from challenge records (see :mod:`~lm_eval_fin.benchmarks.fin_agentbench.data`). A record whose
    prompt lists no chunks becomes a query with no chunks (an empty ranking, scores 0)."""
    queries = []
    for record in records:
        question, chunks = parse_challenge_prompt(prompt_text(record))
        qrel = record.get("qrel")
        queries.append(
            Query(
                id=str(record.get("uuid", record.get("_id"))),
                question=question,
                chunks=chunks,
                qrel={str(k): v for k, v in qrel.items()} if qrel is not None else None,
            )
        )
    return queries


def summary_rows(run: RunResult, variants: Sequence[str]) -> list[dict]:
    """Per variant: mean scores over graded queries, mean rank variance, cost per query."""
    rows = []
    for variant in variants:
        results = [r for r in run.results if r.variant == variant]
        graded = [r.scores for r in results if r.scores is not None]
        variances = [r.rank_variance for r in results if r.rank_variance is not None]
        row = {"variant": variant, "queries": len(results), "graded": len(graded)}
        for metric in ("ndcg", "map", "mrr"):
            row[metric] = sum(s[metric] for s in graded) / len(graded) if graded else None
        row["rank_variance"] = sum(variances) / len(variances) if variances else None
        for name in ("calls", "prompt_tokens", "completion_tokens"):
            row[name] = sum(r.cost[name] for r in results) / len(results) if results else 0.0
        rows.append(row)
    return rows


def stage_lines(run: RunResult) -> list[str]:
    """One line per judge stage: requests, unusable answers, calls and tokens (whole run)."""
    width = max((len(stage) for stage in run.stages), default=0)
    return [
        f"  {stage:<{width}} {count.requests} requests, {count.unusable} unusable, {count.cost.calls} calls "
        f"({count.cost.cached} cached), {count.cost.prompt_tokens} prompt + {count.cost.completion_tokens} completion tokens"
        for stage, count in run.stages.items()
    ]


def format_table(rows: Sequence[dict], k: int) -> str:
    header = f"{'variant':<8} {f'nDCG@{k}':>8} {f'MAP@{k}':>8} {f'MRR@{k}':>8} {'rank var':>9} {'calls/q':>8} {'prompt tok/q':>13} {'compl tok/q':>12}"
    lines = [header]
    for row in rows:
        def pct(value):
            return f"{100 * value:8.2f}" if value is not None else f"{'-':>8}"

        variance = f"{row['rank_variance']:9.3f}" if row["rank_variance"] is not None else f"{'-':>9}"
        lines.append(
            f"{row['variant']:<8} {pct(row['ndcg'])} {pct(row['map'])} {pct(row['mrr'])} {variance} "
            f"{row['calls']:8.1f} {row['prompt_tokens']:13.0f} {row['completion_tokens']:12.0f}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        records = load_records(args.data, kind="chunk")
    except (ChallengeFormatError, FileNotFoundError) as exc:
        print(f"lm-eval-fin rerank: {exc}", file=sys.stderr)
        return 2
    for name in ("k", "max_attempts", "llm_chunk_chars", "llm_prompt_chars"):
        if getattr(args, name) < 1:
            print(f"lm-eval-fin rerank: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.limit is not None and args.limit < 1:
        print("lm-eval-fin rerank: --limit must be at least 1", file=sys.stderr)
        return 2
    queries = queries_from_records(records)[: args.limit]
    variants = VARIANTS if args.variant == "all" else (args.variant,)
    options = options_from_args(args)
    judge = None
    if any(v != "bm25" for v in variants):
        judge = load_judge(args.judge, options)
        if judge is None:
            print(
                "lm-eval-fin rerank: variant(s) other than bm25 need a judge: pass --judge or set LM_EVAL_FIN_JUDGE",
                file=sys.stderr,
            )
            return 2
    config = FinCardsConfig(
        k=args.k, seed=args.seed, max_tokens=options.max_tokens, max_attempts=args.max_attempts,
        llm_chunk_chars=args.llm_chunk_chars, llm_prompt_chars=args.llm_prompt_chars,
    )
    try:
        run = run_fincards(queries, judge, variants, config)
    finally:
        if judge is not None and hasattr(judge, "close"):
            judge.close()

    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            for result in run.results:
                handle.write(json.dumps(result.as_record(), ensure_ascii=False) + "\n")

    graded = sum(q.qrel is not None for q in queries)
    print(
        f"FinCARDS on {args.data}: {len(queries)} queries ({graded} graded), "
        f"judge {judge.spec if judge is not None else '-'}, seed {args.seed}"
    )
    print(format_table(summary_rows(run, variants), args.k))
    if graded < len(queries):
        print(f"note: {len(queries) - graded} queries have no qrel: rankings written, scores skipped")
    if run.distinct_chunks:
        card = run.card_cost
        print(
            f"cards: {run.distinct_chunks} distinct chunks, {card.calls} calls ({card.cached} cached), "
            f"{card.prompt_tokens} prompt + {card.completion_tokens} completion tokens; each card's cost is "
            "split over the queries whose candidates include its chunk, included per query above"
        )
    if run.stages:
        print("judge cost by stage, whole run (unusable: still unparsable after re-asks; fallbacks used):")
        print("\n".join(stage_lines(run)))
    if args.out:
        print(f"wrote {len(run.results)} rankings with audit traces to {args.out}")
    return 0
