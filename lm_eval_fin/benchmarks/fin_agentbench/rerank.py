"""``lm-eval-fin rerank``: FinCARDS on a FinAgentBench chunk-ranking file.

    lm-eval-fin rerank --data chunk_ranking_kaggle_dev.jsonl --judge vllm:Qwen/Qwen2.5-7B-Instruct \\
        --variant all --output_path run.jsonl

Keeps the queries on 10-K and 10-Q filings (``--doc_types``, the paper's setting; how a
record's type is read: :mod:`lm_eval_fin.rerank.doctype`), runs the variants, writes one JSON
line per query and variant (ranking of every chunk, best first; nDCG, MAP and MRR at k when
the record has grades; rank variance; candidate sizes; the judge's outcome; cost; the audit
trace) and a ``.summary.json`` beside it (settings, table, stage counts), and prints a table
per variant in the paper's layout: nDCG@k, MAP@k in both conventions (``MAP@k``, trec_eval's;
``MAPh@k``, over the hits within k, the FinCARDS tables'; see :mod:`lm_eval_fin.measures.ranking`),
MRR@k (x100), stage-1 candidates and
stage-2 survivors per query, rank variance, how many queries were scored and how many of
them fell back, LLM calls and tokens per query; then one line per judge stage with its
requests, failed and unparsable answers, calls and tokens over the whole run.

The Table 2 card ablations and Table 3 strategies are switches (``--card_without``,
``--card_view``, ``--rounds``, ``--fixed_groups``, ``--aggregation``, ``--no_early_stop``),
each mapped to a :class:`~lm_eval_fin.rerank.FinCardsConfig` field.

Judge failures: a variant has no score on a query whose ranking needed a request the judge
failed (printed '-', null in the summary, never the BM25 fallback's score); when any request
failed or stayed unparsable the command says so in one line and exits with status 1.
Records without ``qrel`` (eval files) get rankings and no scores.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench.data import ChallengeFormatError, load_records
from lm_eval_fin.benchmarks.fin_agentbench.prompt import parse_challenge_prompt, prompt_text
from lm_eval_fin.judge import load_judge
from lm_eval_fin.judge.options import options_from_args
from lm_eval_fin.judge.preflight import judge_problems
from lm_eval_fin.measures.ranking import GAINS
from lm_eval_fin.plumbing import atomic, exit_status
from lm_eval_fin.plumbing.exit_status import Problem
from lm_eval_fin.plumbing.flags import add_flag
from lm_eval_fin.rerank import cardview, doctype, tournament
from lm_eval_fin.rerank.pipeline import VARIANTS, FinCardsConfig, Query, RunResult, run_fincards

PROG = "lm-eval-fin rerank"
PAPER_DOC_TYPES = "10-K,10-Q"
STAGES = ("cards", "intent", "llm", "screening", "tournament")
# score -> column header at k
SCORE_COLUMNS = {"ndcg": "nDCG", "map": "MAP", "map_hits": "MAPh", "mrr": "MRR"}
MAP_LEGEND = (
    "MAP@{k}: over every relevant chunk of the query (trec_eval's map_cut); MAPh@{k}: over the relevant "
    "chunks found in the top {k} (the FinCARDS tables' convention)"
)


def _groups(text: str) -> tuple[str, ...]:
    groups = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [g for g in groups if g not in cardview.GROUPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown field group(s) {unknown}; choose from {', '.join(cardview.GROUPS)}")
    return groups


def _doc_types(text: str) -> tuple[str, ...] | None:
    try:
        return doctype.parse_doc_types(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="chunk-ranking challenge JSONL file, or a folder of chunk_ranking*.jsonl")
    parser.add_argument(
        "--variant", default="full", choices=[*VARIANTS, "all"],
        help="which row of the paper's ablation to run; 'all' runs every one and prints the table (default: full)",
    )
    add_flag(parser, "--doc_types", type=_doc_types, default=doctype.parse_doc_types(PAPER_DOC_TYPES),
        help=f"keep queries on these filing types, comma-separated ({', '.join(doctype.FORMS)}), or 'all'; "
        f"queries whose type cannot be read are kept and counted (default: {PAPER_DOC_TYPES}, the paper's setting)",
    )
    parser.add_argument("--output_path", "--out", default=None,
                        help="write rankings, scores, costs and audit traces here (JSONL; --out is an alias)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stage-3 regrouping (default: 0)")
    parser.add_argument("--k", type=int, default=10, help="metric cutoff and stage-3 top-k (default: 10)")
    parser.add_argument(
        "--gain", default=FinCardsConfig.gain, choices=GAINS,
        help="nDCG gain: exponential (2^g - 1) or linear (g, trec_eval's ndcg_cut)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries (after --doc_types)")
    add_flag(parser, "--max_attempts", type=int, default=FinCardsConfig.max_attempts,
        help="times a judge request is asked before its answer counts as unparsable",
    )
    add_flag(parser, "--llm_chunk_chars", type=int, default=FinCardsConfig.llm_chunk_chars,
        help="at most this many characters of each chunk are shown to the zero-shot llm baseline",
    )
    add_flag(parser, "--llm_prompt_chars", type=int, default=FinCardsConfig.llm_prompt_chars,
        help="characters of chunk text in the llm baseline's prompt, shared by its candidates; the default "
        "fits a 32k-token context",
    )
    cards = parser.add_argument_group("cards (the paper's Table 2)")
    cards.add_argument(
        "--cards", default=FinCardsConfig.card_kind, choices=cardview.KINDS,
        help="core: section 3.2's card (judge-written core, rule-derived triple, evidence spans and auxiliary "
        "fields); b1: the appendix B.1 card",
    )
    add_flag(cards, "--card_without", type=_groups, default=(), metavar="GROUPS",
        help=f"remove field groups from the cards, comma-separated: {', '.join(cardview.GROUPS)} "
        "(Table 2's 'w/o temporal_data', 'w/o financial_metrics', 'w/o tables', 'w/o scope')",
    )
    add_flag(cards, "--card_view", default=FinCardsConfig.card_view, choices=cardview.VIEWS,
        help="what stages 2 and 3 see: the card, its summary only ('only summary'), or the chunk's text "
        "cut to --raw_chars ('raw chunks (no card)')",
    )
    add_flag(cards, "--raw_chars", type=int, default=FinCardsConfig.raw_chars,
        help="characters of each chunk shown with --card_view raw",
    )
    stage3 = parser.add_argument_group("stage 3 (the paper's Table 3)")
    stage3.add_argument(
        "--rounds", type=int, default=FinCardsConfig.max_rounds,
        help="most bootstrap rounds; 1 is Table 3's single round",
    )
    add_flag(stage3, "--fixed_groups", action="store_true", help="keep the first round's groups (Table 3's fixed grouping)")
    stage3.add_argument(
        "--aggregation", default="borda", choices=[a.replace("_", "-") for a in tournament.AGGREGATIONS],
        help="how rounds are combined: normalised Borda points, mean rank, or top-k votes",
    )
    add_flag(stage3, "--no_early_stop", action="store_true", help="always run --rounds rounds (no Jaccard stop)")


def config_from_args(args: argparse.Namespace, max_tokens: int) -> FinCardsConfig:
    """The method's settings from the command line: each switch is one config field."""
    return FinCardsConfig(
        k=args.k, gain=args.gain, seed=args.seed, max_tokens=max_tokens, max_attempts=args.max_attempts,
        llm_chunk_chars=args.llm_chunk_chars, llm_prompt_chars=args.llm_prompt_chars,
        card_kind=args.cards, card_without=tuple(args.card_without), card_view=args.card_view,
        raw_chars=args.raw_chars, max_rounds=args.rounds, regroup=not args.fixed_groups,
        aggregation=args.aggregation.replace("-", "_"), early_stop=not args.no_early_stop,
    )


def _outside_chunks(text: str, chunks: Mapping[int, str]) -> str:
    """The prompt without the chunks' text: the instruction, the question and the markers."""
    for body in chunks.values():
        if body:
            text = text.replace(body, " ")
    return text


def queries_from_records(records: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries from challenge records (see :mod:`~lm_eval_fin.benchmarks.fin_agentbench.data`),
    with their filing type (:func:`lm_eval_fin.rerank.doctype.document_type`). A record whose
    prompt lists no chunks becomes a query with no chunks (an empty ranking, scores 0)."""
    queries = []
    for record in records:
        text = prompt_text(record)
        question, chunks = parse_challenge_prompt(text)
        form, source = doctype.document_type(record, _outside_chunks(text, chunks), chunks.values())
        qrel = record.get("qrel")
        queries.append(
            Query(
                id=str(record.get("uuid", record.get("_id"))),
                question=question,
                chunks=chunks,
                qrel={str(k): v for k, v in qrel.items()} if qrel is not None else None,
                doc_type=form,
                doc_type_from=source,
            )
        )
    return queries


def select_doc_types(queries: Sequence[Query], wanted: Sequence[str] | None) -> tuple[list[Query], dict[str, Any]]:
    """The queries on the ``wanted`` filing types (all when None; an undetermined type is
    kept), and what was kept and dropped, for the output."""
    kept = [q for q in queries if wanted is None or q.doc_type is None or q.doc_type in wanted]
    dropped = Counter(q.doc_type for q in queries if q not in kept)
    summary = {
        "wanted": list(wanted) if wanted is not None else "all",
        "kept": len(kept),
        "kept_by_type": dict(Counter(q.doc_type or "undetermined" for q in kept)),
        "read_from": dict(Counter(q.doc_type_from for q in kept)),
        "dropped": sum(dropped.values()),
        "dropped_by_type": dict(dropped),
    }
    return kept, summary


def doc_type_line(summary: Mapping[str, Any], total: int) -> str:
    wanted = summary["wanted"]
    label = ", ".join(wanted) if wanted != "all" else "all"
    kept = ", ".join(f"{t} {n}" for t, n in summary["kept_by_type"].items()) or "none"
    read = ", ".join(f"{where} {n}" for where, n in summary["read_from"].items()) or "-"
    line = f"document types {label}: {summary['kept']} of {total} queries kept ({kept}; type read from: {read})"
    if summary["dropped"]:
        line += "; dropped " + ", ".join(f"{t} {n}" for t, n in summary["dropped_by_type"].items())
    if summary["kept_by_type"].get("undetermined"):
        line += "; an undetermined type is kept (see docs/fincards.md)"
    return line


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary_rows(run: RunResult, variants: Sequence[str]) -> list[dict]:
    """Per variant: mean scores over the scored queries (graded, and no judge failure),
    stage-1 candidates and stage-2 survivors per query, mean rank variance (``variance_reference``:
    how many of its queries had one round, see :mod:`~lm_eval_fin.rerank.tournament`), the
    judge's outcome counts, and cost per query."""
    rows = []
    for variant in variants:
        results = [r for r in run.results if r.variant == variant]
        scored = [r.scores for r in results if r.scores is not None]
        standing = [r for r in results if r.judge.status != "failed"]
        variances = [(r.rank_variance, r.variance_measured) for r in standing if r.rank_variance is not None]
        row: dict[str, Any] = {
            "variant": variant,
            "queries": len(results),
            "graded": sum(r.graded for r in results),
            "scored": len(scored),
            "failed": sum(r.judge.status == "failed" for r in results),
            "fallback": sum(r.judge.status == "fallback" for r in results),
        }
        for metric in SCORE_COLUMNS:
            row[metric] = _mean([scores[metric] for scores in scored])
        row["stage1_candidates"] = _mean([r.candidates for r in results])
        survivors = [r.survivors for r in standing if r.survivors is not None]
        row["stage2_survivors"] = _mean(survivors)
        row["rank_variance"] = _mean([variance for variance, _ in variances])
        row["variance_reference"] = sum(not measured for _, measured in variances)
        for name in ("calls", "prompt_tokens", "completion_tokens"):
            row[name] = sum(r.cost[name] for r in results) / len(results) if results else 0.0
        rows.append(row)
    return rows


def stage_lines(run: RunResult) -> list[str]:
    """One line per judge stage: requests, failed and unparsable, calls and tokens (whole run)."""
    width = max((len(stage) for stage in run.stages), default=0)
    return [
        f"  {stage:<{width}} {count.requests} requests, {count.failed} failed, {count.unparsed} unparsable, "
        f"{count.cost.calls} calls ({count.cost.cached} cached), {count.cost.prompt_tokens} prompt + "
        f"{count.cost.completion_tokens} completion tokens"
        for stage, count in run.stages.items()
    ]


def format_table(rows: Sequence[dict], k: int) -> str:
    """The paper's layout: x100 scores, then candidate sizes, rank variance, coverage, cost."""
    scores = " ".join(f"{f'{name}@{k}':>8}" for name in SCORE_COLUMNS.values())
    header = (
        f"{'variant':<8} {scores} {'S1 cand':>8} {'S2 kept':>8} "
        f"{'rank var':>9} {'scored':>7} {'fallbk':>6} {'calls/q':>8} {'prompt tok/q':>13} {'compl tok/q':>12}"
    )
    lines = [header]
    footnote = False

    def pct(value: float | None) -> str:
        return f"{100 * value:8.2f}" if value is not None else f"{'-':>8}"

    def size(value: float | None) -> str:
        return f"{value:8.1f}" if value is not None else f"{'-':>8}"

    for row in rows:
        if row["rank_variance"] is None:
            variance = f"{'-':>9}"
        else:
            mark = "*" if row["variance_reference"] else " "
            footnote = footnote or bool(row["variance_reference"])
            variance = f"{row['rank_variance']:8.4f}{mark}"
        lines.append(
            f"{row['variant']:<8} {' '.join(pct(row[metric]) for metric in SCORE_COLUMNS)} "
            f"{size(row['stage1_candidates'])} {size(row['stage2_survivors'])} {variance} "
            f"{row['scored']:>3}/{row['graded']:<3} {row['fallback']:>6} "
            f"{row['calls']:8.1f} {row['prompt_tokens']:13.0f} {row['completion_tokens']:12.0f}"
        )
    lines.append(MAP_LEGEND.format(k=k))
    if footnote:
        lines.append(
            "* includes tournaments of one round, whose rank variance is the reference value of a random "
            "ranking, (g+1)/(12(g-1)), not a measurement"
        )
    return "\n".join(lines)


def failure_line(run: RunResult, rows: Sequence[dict], max_attempts: int) -> str | None:
    """One line for a run where the judge failed or left answers unparsable; None otherwise."""
    if not run.failed and not run.unparsed:
        return None
    parts = []
    if run.failed:
        where = ", ".join(f"{s} {c.failed}" for s, c in run.stages.items() if c.failed)
        lost = ", ".join(f"{r['variant']} on {r['failed']} of {r['queries']}" for r in rows if r["failed"])
        first = next((c.first_error for c in run.stages.values() if c.first_error), None)
        parts.append(
            f"the judge failed {run.failed} requests ({where}); no score for {lost}; rerunning the same command "
            f"resumes from the judge cache (first error: {first})"
        )
    if run.unparsed:
        where = ", ".join(f"{s} {c.unparsed}" for s, c in run.stages.items() if c.unparsed)
        parts.append(
            f"{run.unparsed} answers stayed unparsable after {max_attempts} attempts ({where}); their fallbacks "
            f"stood in and their queries count under 'fallbk'; a larger --max_attempts asks them again"
        )
    return f"{PROG}: " + "; ".join(parts)


def write_outputs(path: str, run: RunResult, summary: dict[str, Any]) -> Path:
    """The JSONL of rankings and the ``.summary.json`` beside it; returns the summary's path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.open_text(out) as handle:
        for result in run.results:
            handle.write(json.dumps(result.as_record(), ensure_ascii=False) + "\n")
    summary_path = out.with_name(out.stem + ".summary.json")
    atomic.write_text(summary_path, json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    return summary_path


def main(args: argparse.Namespace) -> int:
    problems, records = [], []
    try:
        records = load_records(args.data, kind="chunk")
    except (ChallengeFormatError, OSError) as exc:
        problems.append(Problem(str(exc)))
    for name in ("k", "max_attempts", "llm_chunk_chars", "llm_prompt_chars", "raw_chars", "rounds"):
        if getattr(args, name) < 1:
            problems.append(Problem(f"--{name} must be at least 1"))  # the snake_case flag, as help shows it
    if args.limit is not None and args.limit < 1:
        problems.append(Problem("--limit must be at least 1"))
    output = atomic.output_problem(args.output_path)
    if output is not None:
        problems.append(Problem(output))
    variants = VARIANTS if args.variant == "all" else (args.variant,)
    judge = None
    try:
        options = options_from_args(args)
        if any(v != "bm25" for v in variants):
            judge = load_judge(args.judge, options)
            if judge is None:
                problems.append(Problem("variant(s) other than bm25 need a judge: pass --judge or set LM_EVAL_FIN_JUDGE"))
            elif getattr(judge, "parsed_spec", None) is not None:  # a judge of ours (not a test double)
                problems += judge_problems([judge.parsed_spec], score_later=False)
    except ValueError as exc:  # a bad spec (JudgeSpecError) or bad judge options
        problems.append(Problem(str(exc)))
    if problems:
        return exit_status.report(PROG, problems)
    every = queries_from_records(records)
    queries, types = select_doc_types(every, args.doc_types)
    queries = queries[: args.limit]
    if not queries:
        return exit_status.report(PROG, [Problem(f"no query left: {doc_type_line(types, len(every))}")])
    config = config_from_args(args, options.max_tokens)
    try:
        run = run_fincards(queries, judge, variants, config)
    finally:
        if judge is not None and hasattr(judge, "close"):
            judge.close()

    rows = summary_rows(run, variants)
    settings = config.changes()
    graded = sum(q.qrel is not None for q in queries)
    print(
        f"FinCARDS on {args.data}: {len(queries)} queries ({graded} graded), "
        f"judge {judge.spec if judge is not None else '-'}, seed {args.seed}"
    )
    print(doc_type_line(types, len(every)))
    print("settings: " + (", ".join(f"{k}={v}" for k, v in settings.items() if k != "seed") or "the paper's defaults"))
    print(format_table(rows, args.k))
    if graded < len(queries):
        print(f"note: {len(queries) - graded} queries have no qrel: rankings written, scores skipped")
    if run.distinct_chunks:
        card = run.card_cost
        print(
            f"cards: {run.distinct_chunks} distinct chunks, {card.calls} calls ({card.cached} cached), "
            f"{card.prompt_tokens} prompt + {card.completion_tokens} completion tokens; each card's cost is "
            "split over the queries whose candidates include its chunk, included per query above"
        )
        if config.card_kind == "core" and config.card_view != "raw":
            print(
                f"numeric spans on the judge's cards: {run.spans_kept} kept, {run.spans_dropped} dropped "
                "(not found verbatim in their chunk)"
            )
    if run.stages:
        print("judge cost by stage, whole run (failed: no answer; unparsable: still unreadable after re-asks, fallbacks used):")
        print("\n".join(stage_lines(run)))
    problem = failure_line(run, rows, config.max_attempts)
    if args.output_path:
        summary = {
            "data": str(args.data),
            "judge": judge.spec if judge is not None else None,
            "variants": list(variants),
            "doc_types": types,
            "settings": {"k": config.k, "gain": config.gain, "seed": config.seed, **settings},
            "table": rows,  # a mean over no scored query is null
            "stages": {
                stage: {"requests": c.requests, "failed": c.failed, "unparsed": c.unparsed, **c.cost.as_dict()}
                for stage, c in run.stages.items()
            },
            "numeric_spans": {"kept": run.spans_kept, "dropped": run.spans_dropped},
            "judge_problem": problem,
        }
        summary_path = write_outputs(args.output_path, run, summary)
        print(f"wrote {len(run.results)} rankings with audit traces to {args.output_path}, the summary to {summary_path}")
    if problem is not None:
        print(problem, file=sys.stderr)
        return exit_status.INCOMPLETE
    return 0
